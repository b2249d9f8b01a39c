import type { AdminDeps, AnswerHandlers } from './answers.js';
import { stateAnswers, type StateRouteName } from './admin-state.js';
import { statusAnswers, type StatusRouteName } from './admin-status.js';
import { userAnswers, type UserRouteName } from './admin-users.js';
import { vaultAnswers, type VaultRouteName } from './admin-vault.js';

/**
 * The admin API's routes but the live ones (live-api.ts), typed by edge/admin/api.ts, one file per
 * group: users, apps and providers; the vault; the state; the processes. edge/routes.ts mounts them
 * from ADMIN_API, with the live ones, through `envelopedAll` (answers.ts).
 */
export type AdminAnswerName = UserRouteName | VaultRouteName | StateRouteName | StatusRouteName;

export function adminAnswers(deps: AdminDeps): AnswerHandlers<AdminAnswerName> {
  return { ...statusAnswers(deps), ...userAnswers(deps), ...vaultAnswers(deps), ...stateAnswers(deps) };
}

import type { AppView } from '../../bus/subjects.js';
import type { VaultDeps } from './handler.js';
import { destroyScope } from './versions.js';

/** Workspaces an app's manifest grants on this vault (from `<Op>?workspace=<ws>` ops). */
export function workspacesOf(app: AppView, group: string): Set<string> {
  const out = new Set<string>();
  for (const g of app.grants) {
    if (g.dataType !== 'secret' || g.group !== group) continue;
    for (const op of g.ops) out.add(op.slice(op.indexOf('=') + 1));
  }
  return out;
}

/**
 * `pier app uninstall --purge`: the removed app's workspaces go with their secrets and data keys,
 * unless another app of the user still uses them (`others`: the user's apps left). Audited in the
 * same write, one `Purge` entry per workspace.
 */
export function purgeWorkspaces(deps: VaultDeps, removed: AppView, others: readonly AppView[]): Promise<void> {
  const stillUsed = new Set(others.flatMap((a) => [...workspacesOf(a, deps.vaultGroup)]));
  const doomed = [...workspacesOf(removed, deps.vaultGroup)].filter((ws) => !stillUsed.has(ws));
  return deps.store.write((w) => {
    for (const ws of doomed) {
      for (const scope of w.scopesOf(removed.user, ws)) {
        destroyScope(w, scope);
        deps.keys.remove(scope, w);
      }
      deps.auditInWrite(w, { at: new Date(deps.now()).toISOString(), user: removed.user, app: removed.name, op: 'Purge', workspace: ws, env: null, name: null, outcome: 'ok' });
    }
  });
}

import { ask } from '../../bus/verbs.js';
import { ErrorReasons, PierError } from '../../bus/errors.js';
import { APP_NAME, APP_NAME_RULE, isOperatorVersionOp, OPERATOR_IN_AUDIT, OPERATOR_VERSIONS_WIRE, registry, REKEY_WIRE, USER_NAME, USER_NAME_RULE, vault, type AuditQuery, type OperatorVaultAnswers, type OperatorVaultRequest, type RekeyAnswer, type RekeyRequest } from '../../bus/subjects.js';
import type { HttpRequestData } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import type { AuditRow } from './api.js';
import { besideData, type AdminDeps, type AnswerHandlers } from './answers.js';

/** The admin routes of the vault (docs/protocol.md "Admin API"): its audit, the operator's secrets, its keys. */
export type VaultRouteName =
  | 'vaultAudit'
  | 'vaultList'
  | 'vaultPurge'
  | 'vaultGetByPath'
  | 'vaultSetByPath'
  | 'vaultDeleteByPath'
  | 'vaultGet'
  | 'vaultSet'
  | 'vaultDelete'
  | 'vaultVersions'
  | 'vaultDeleted'
  | 'vaultRestore'
  | 'vaultUndelete'
  | 'vaultDestroy'
  | 'vaultFormats'
  | 'vaultRekey'
  | 'rotateMasterKey';

/**
 * An operation on versions goes on their own subject, which only vault replicas that speak wire
 * format 2 serve (docs/operations.md "Upgrading"): whatever a heartbeat claims, no 0.2 replica is
 * handed one. With no such replica running, nothing answers: said by name, not as a missing vault.
 */
async function askVersions(deps: AdminDeps, request: OperatorVaultRequest) {
  try {
    return await ask(deps.bus, vault.versions, request, { wire: OPERATOR_VERSIONS_WIRE });
  } catch (err) {
    if (!(err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS))) throw err;
    // Heartbeats only choose the words here, never whether the operation is sent.
    const heard = deps.peers.alive('vault').length;
    if (heard === 0) throw err;
    const message = `vault ${request.op} needs a vault replica of this release (wire format ${OPERATOR_VERSIONS_WIRE}), and none is running: the vault replicas running are of an earlier release; finish the upgrade (docs/operations.md "Upgrading")`;
    throw new PierError('UNAVAILABLE', message, { cause: err, reason: ErrorReasons.UNSUPPORTED_VERSION });
  }
}

/** `pier vault rekey` goes on its own subject, served by vault replicas of wire format 3 only: as `askVersions`. */
async function askRekey(deps: AdminDeps, request: RekeyRequest): Promise<RekeyAnswer> {
  try {
    return await ask(deps.bus, vault.rekey, request, { wire: REKEY_WIRE });
  } catch (err) {
    if (!(err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS)) || deps.peers.alive('vault').length === 0) throw err;
    const message = `vault rekey needs a vault replica of this release (wire format ${REKEY_WIRE}), and none is running: the vault replicas running are of an earlier release; finish the upgrade (docs/operations.md "Upgrading")`;
    throw new PierError('UNAVAILABLE', message, { cause: err, reason: ErrorReasons.UNSUPPORTED_VERSION });
  }
}

export function vaultAnswers(deps: AdminDeps): AnswerHandlers<VaultRouteName> {
  const vaultOp = async <Op extends OperatorVaultRequest['op']>(op: Op, req: HttpRequestData): Promise<OperatorVaultAnswers[Op]> => {
    const q = (k: string) => req.query.get(k) ?? undefined;
    const withBody = op === 'set' || op === 'restore' || (op === 'destroy' && req.body.length > 0);
    const body = withBody ? (parseJsonBody(req) as { value?: unknown; version?: unknown }) : {};
    if (op === 'set' && typeof body.value !== 'string') throw new PierError('BAD_REQUEST', 'value: must be a string');
    const version = body.version;
    if ((op === 'restore' || version !== undefined) && !(typeof version === 'number' && Number.isSafeInteger(version) && version >= 1)) {
      throw new PierError('BAD_REQUEST', 'version: must be a whole number from 1');
    }
    const name = req.params.name ?? q('name');
    const request = {
      op,
      user: q('user') ?? '',
      workspace: q('workspace') ?? '',
      ...(q('env') ? { env: q('env') } : {}),
      ...(name ? { name } : {}),
      ...(op === 'set' ? { value: body.value as string } : {}),
      ...(typeof version === 'number' ? { version } : {}),
      ...(op === 'versions' && q('deleted') === 'true' ? { deleted: true } : {}),
    };
    // The vault answers the shape of the operation asked (bus/subjects-vault.ts OperatorVaultAnswers).
    if (!isOperatorVersionOp(op)) return (await ask(deps.bus, vault.operator, request)).data as OperatorVaultAnswers[Op];
    return (await askVersions(deps, request)).data as OperatorVaultAnswers[Op];
  };

  return {
    vaultAudit: async (req) => {
      const user = req.query.get('user') ?? undefined;
      if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: ${USER_NAME_RULE}`);
      const limitText = req.query.get('limit') ?? '100';
      if (!/^\d{1,6}$/.test(limitText) || Number(limitText) < 1) throw new PierError('BAD_REQUEST', 'limit: must be an integer from 1 to 100000');
      // `app` and `op` narrow the search (the console's filters; `pier vault audit --app --op`): the
      // vault searches back until `limit` entries match, through AUDIT_SCAN_MAX entries at most.
      const app = req.query.get('app') ?? undefined;
      const op = req.query.get('op') ?? undefined;
      if (app !== undefined && app !== OPERATOR_IN_AUDIT && !APP_NAME.test(app)) throw new PierError('BAD_REQUEST', `app: ${APP_NAME_RULE}, or ${OPERATOR_IN_AUDIT}`);
      if (op !== undefined && !/^[A-Za-z]{1,64}$/.test(op)) throw new PierError('BAD_REQUEST', 'op: must be an operation name, letters only');
      const query: AuditQuery = { ...(user === undefined ? {} : { user }), ...(app === undefined ? {} : { app }), ...(op === undefined ? {} : { op }), limit: Math.min(100_000, Number(limitText)) };
      const page = await ask(deps.bus, vault.audit, query);
      const rows: AuditRow[] = page.entries.map((e) => ({ at: e.at, user: e.user, app: e.app, op: e.op, workspace: e.workspace, env: e.env, name: e.name, outcome: e.outcome }));
      if (page.complete) return rows;
      // Fewer matches than asked, and older entries not searched: said beside `data` (docs/protocol.md "Admin API").
      return besideData(rows, { searched: { entries: page.scanned, backTo: page.searchedBackTo, complete: false } });
    },
    // `pier vault list|get|set|delete|purge`: one user's workspace, as the operator. The target in
    // the query (`user`, `workspace`, `env`), the name in the path or the query; a value only in a PUT body.
    vaultList: (req) => vaultOp('list', req),
    vaultPurge: (req) => vaultOp('purge', req),
    vaultGetByPath: (req) => vaultOp('get', req),
    vaultSetByPath: (req) => vaultOp('set', req),
    vaultDeleteByPath: (req) => vaultOp('delete', req),
    vaultGet: (req) => vaultOp('get', req),
    vaultSet: (req) => vaultOp('set', req),
    vaultDelete: (req) => vaultOp('delete', req),
    vaultVersions: (req) => vaultOp('versions', req),
    vaultDeleted: (req) => vaultOp('deleted', req),
    vaultRestore: (req) => vaultOp('restore', req),
    vaultUndelete: (req) => vaultOp('undelete', req),
    vaultDestroy: (req) => vaultOp('destroy', req),
    vaultFormats: () => askRekey(deps, { status: true }),
    vaultRekey: (req) => {
      const body = req.body.length > 0 ? (parseJsonBody(req) as { limit?: unknown }) : {};
      if (body.limit !== undefined && !(typeof body.limit === 'number' && Number.isSafeInteger(body.limit) && body.limit >= 1 && body.limit <= 1_000_000)) {
        throw new PierError('BAD_REQUEST', 'limit: must be a whole number from 1 to 1000000');
      }
      return askRekey(deps, body.limit === undefined ? {} : { limit: body.limit });
    },
    /** After restarting every process with the new PIER_MASTER_KEY and the old one as PIER_MASTER_KEY_PREVIOUS. */
    rotateMasterKey: async () => {
      const { rewrapped } = await ask(deps.bus, vault.rotate, {});
      const { resealed } = await ask(deps.bus, registry.appReseal, {});
      return { rewrappedDataKeys: rewrapped, resealedAppSecrets: resealed, rewrapped_data_keys: rewrapped, resealed_app_secrets: resealed };
    },
  };
}

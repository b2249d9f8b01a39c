import { PierError } from '../../bus/errors.js';
import { OPERATOR_IN_AUDIT, type AuditEntry, type OperatorVaultAnswers, type OperatorVaultRequest, type SecretOp } from '../../bus/subjects.js';
import { perform, type VaultDeps } from './handler.js';
import { nameOf, scopeKey, secretKey, sizeOf } from './store.js';

/** Who the audit log names for what the operator did. */
export const OPERATOR = OPERATOR_IN_AUDIT;

/**
 * `pier vault list|get|set|delete|purge|versions` (the admin role, through the admin API): the same
 * operations as an app's, on one user's workspace, audited as the operator. `list` answers names
 * and versions only; a value is shown only by an explicit `get`. `set` creates or updates. `purge`
 * deletes every secret of the workspace in every env, with its data keys: what `uninstall --purge`
 * does, for secrets a plain uninstall kept.
 */
export async function operatorOp(deps: VaultDeps, req: OperatorVaultRequest): Promise<{ data: OperatorVaultAnswers[OperatorVaultRequest['op']] }> {
  if (!deps.cache.userExists(req.user)) throw new PierError('NOT_FOUND', `user "${req.user}" not found`);
  const env = req.env ?? 'prod';
  const entry = (op: string) => (outcome: string): AuditEntry => ({ at: new Date(deps.now()).toISOString(), user: req.user, app: OPERATOR, op, workspace: req.workspace, env: req.op === 'purge' ? null : env, name: req.name ?? null, outcome });
  const who = { user: req.user, app: OPERATOR };
  const scope = scopeKey(req.user, req.workspace, env);
  await deps.store.sync();
  if (req.op === 'list') {
    const data = deps.store.listScope(scope).map(({ key, value }) => ({ name: nameOf(key), version: value.version, updatedAt: value.updatedAt, updatedBy: value.updatedBy }));
    deps.audit(entry('ListSecret')('ok'));
    return { data };
  }
  if (req.op === 'purge') {
    const removed = await deps.store.write((w) => {
      let n = 0;
      for (const s of w.scopesOf(req.user, req.workspace)) {
        for (const { key } of w.listScope(s)) {
          w.removeSecret(key);
          n++;
        }
        deps.keys.remove(s, w);
      }
      deps.auditInWrite(w, entry('Purge')('ok'));
      return n;
    });
    return { data: { purged: removed } };
  }
  if (req.name === undefined) throw new PierError('BAD_REQUEST', 'name: is required');
  if (req.op === 'versions') {
    const record = deps.store.secret(secretKey(scope, req.name));
    if (!record) throw new PierError('NOT_FOUND', `secret "${req.name}" not found in ${env}`);
    const current = { version: record.version, at: record.updatedAt, by: record.updatedBy, size: sizeOf(record) ?? null, current: true };
    const earlier = record.history.map((v) => ({ version: v.version, at: v.at, by: v.by, size: v.size ?? null, current: false })).reverse();
    deps.audit(entry('ListVersions')('ok'));
    return { data: { name: req.name, env, version: record.version, versions: [current, ...earlier] } };
  }
  const op: SecretOp = req.op === 'get' ? 'RetrieveSecret' : req.op === 'delete' ? 'DeleteSecret' : deps.store.secret(secretKey(scope, req.name)) ? 'UpdateSecret' : 'CreateSecret';
  if (req.op === 'set' && req.value === undefined) throw new PierError('BAD_REQUEST', 'value: is required');
  const body: Record<string, unknown> = { name: req.name, env, ...(req.value !== undefined ? { value: req.value } : {}) };
  const answer = await perform(deps, op, scope, who, body, entry(op)).catch((err: unknown) => {
    if (err instanceof PierError) deps.audit(entry(op)(err.code));
    throw err;
  });
  if (op === 'DeleteSecret') return { data: { deleted: req.name, env } };
  // A read, a create and an update always carry the record's version (handler.ts).
  const version = answer.version;
  if (version === undefined) throw new Error(`the vault's ${op} answered no version`);
  if (op === 'RetrieveSecret') return { data: { ...(answer.data as { name: string; env: string; value: string }), version } };
  return { data: { name: req.name, env, version } };
}

import { PierError } from '../../bus/errors.js';
import { OPERATOR_IN_AUDIT, type AuditEntry, type OperatorVaultAnswers, type OperatorVaultRequest, type SecretBodies, type SecretEnv, type SecretOp, type VaultAnswer } from '../../bus/subjects.js';
import type { VaultDeps } from './handler.js';
import { perform } from './ops.js';
import { nameOf, scopeKey, secretKey } from './store.js';
import { purge } from './purge.js';
import { restore } from './versions.js';
import { destroy, undelete } from './versions-deleted.js';
import { listDeleted, listVersions } from './versions-read.js';

/** Erases what can be erased now; what is younger than `scrubAfterMs` goes at the hourly sweep (index.ts). */
async function scrubAfterDestroy(deps: VaultDeps, key: string): Promise<void> {
  await deps.store.scrub?.(deps.now() - deps.bounds.scrubAfterMs, [key]).catch(() => undefined);
}

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
    // Destroyed at once, deleted secrets and kept versions with the rest (no window), and erased (purge.ts).
    const removed = await purge(deps, req.user, [req.workspace], (w) => deps.auditInWrite(w, entry('Purge')('ok')));
    return { data: { purged: removed } };
  }
  if (req.op === 'deleted') {
    const data = listDeleted(deps.store, scope, deps.bounds);
    deps.audit(entry('ListDeleted')('ok'));
    return { data };
  }
  if (req.name === undefined) throw new PierError('BAD_REQUEST', 'name: is required');
  const name = req.name;
  const key = secretKey(scope, name);
  if (req.op === 'versions') {
    const listed = listVersions(deps.store, key, req.deleted ? 'deleted' : 'live-or-deleted');
    if (!listed) throw new PierError('NOT_FOUND', req.deleted ? `no deleted secret "${name}" in ${env}` : `secret "${name}" not found in ${env}, live or deleted`);
    deps.audit(entry('ListVersions')('ok'));
    const deleted = listed.deleted ? { ...listed.deleted, destroyAt: new Date(Date.parse(listed.deleted.at) + deps.bounds.deletedForMs).toISOString() } : null;
    return { data: { name, env, version: listed.version, versions: listed.versions, deleted } };
  }
  if (req.op === 'restore' || req.op === 'undelete' || req.op === 'destroy') {
    const op = req.op;
    if (op === 'restore' && req.version === undefined) throw new PierError('BAD_REQUEST', 'version: is required (the version to restore)');
    const audited = entry({ restore: 'RestoreVersion', undelete: 'Undelete', destroy: 'Destroy' }[op]);
    const at = new Date(deps.now()).toISOString();
    try {
      const answer = await deps.store.write((w) => {
        const data =
          op === 'restore'
            ? (() => {
                const next = restore(w, deps.bounds, key, req.version!, OPERATOR, at, (sealed) => deps.values.reseal(scope, key, sealed, w));
                return { name, env, version: next.version, restored: req.version! };
              })()
            : op === 'undelete'
              ? { name, env, version: undelete(w, key).version }
              : { name, env, destroyed: destroy(w, key, req.version) };
        deps.auditInWrite(w, audited('ok'));
        return { data };
      });
      // A destroyed value leaves the secret's own earlier records too, where the store keeps them (JetStream).
      if (op === 'destroy') await scrubAfterDestroy(deps, key);
      return answer;
    } catch (err) {
      if (err instanceof PierError) deps.audit(audited(err.code));
      throw err;
    }
  }
  // The exchange's schema admits SECRET_ENVS alone (bus/subjects-vault.ts operatorRequest).
  const secretEnv = env as SecretEnv;
  const call = async <O extends SecretOp>(op: O, body: SecretBodies[O]) => {
    try {
      return await perform(deps, op, scope, who, body, entry(op));
    } catch (err) {
      if (err instanceof PierError) deps.audit(entry(op)(err.code));
      throw err;
    }
  };
  if (req.op === 'get') {
    const answer = await call('RetrieveSecret', { name, env: secretEnv });
    return { data: { ...(answer.data as { name: string; env: string; value: string }), version: versionOf(answer, 'RetrieveSecret') } };
  }
  if (req.op === 'delete') {
    await call('DeleteSecret', { name, env: secretEnv });
    return { data: { deleted: name, env } };
  }
  // `set` creates or updates.
  const op = deps.store.secret(key) ? 'UpdateSecret' : 'CreateSecret';
  if (req.value === undefined) throw new PierError('BAD_REQUEST', 'value: is required');
  const answer = await call(op, { name, env: secretEnv, value: req.value });
  return { data: { name, env, version: versionOf(answer, op) } };
}

/** A read, a create and an update always carry the record's version (ops.ts). */
function versionOf(answer: VaultAnswer, op: SecretOp): number {
  if (answer.version === undefined) throw new Error(`the vault's ${op} answered no version`);
  return answer.version;
}

import { PierError } from '../../bus/errors.js';
import { genOf, nameOf, sealedSize, secretFormatOf, versionKey, versionPrefix, type SecretRecord, type VaultWriter } from './store.js';
import { deletedOf, keepVersion, notKept, type VersionBounds } from './versions.js';

// Soft delete, undelete and destroy (docs/vault.md "Versions"). Every function here runs inside one
// store write (`w`) with the change it belongs to, as those of versions.ts do.

const SEP = '\u0000';

/**
 * DeleteSecret: the secret leaves the live ones at once (a read answers 404, a create starts a new
 * generation); its value is kept as its last version and the record as a deleted one, for
 * `deletedForMs`. A name deleted before and not undelete is destroyed first: one deleted copy per name.
 */
export function softDelete(w: VaultWriter, bounds: VersionBounds, key: string, record: SecretRecord, by: string, at: string): void {
  const earlier = deletedOf(w, key);
  if (earlier) destroyGeneration(w, key, earlier.gen);
  if (bounds.perSecret === 0) {
    // Nothing kept (PIER_VAULT_VERSIONS=0): a delete is final, as before versions.
    w.removeSecret(key);
    destroyGeneration(w, key, genOf(record));
    return;
  }
  // Committed in this order: a write cut short leaves the secret live (the delete was not answered).
  w.putDeleted(key, {
    format: 1,
    gen: genOf(record),
    version: record.version,
    createdAt: record.createdAt,
    createdBy: record.createdBy,
    updatedAt: record.updatedAt,
    updatedBy: record.updatedBy,
    history: record.history,
    deletedAt: at,
    deletedBy: by,
  });
  keepVersion(w, bounds, key, record, by);
  w.removeSecret(key);
}

/** Every kept version of one generation, and the deleted record when it is that generation's. */
export function destroyGeneration(w: VaultWriter, key: string, gen: string): number[] {
  const live = w.secret(key);
  if (live && genOf(live) === gen) {
    // The live secret's own generation (a stale deleted record): only the record goes.
    if (w.deleted(key)?.gen === gen) w.removeDeleted(key);
    return [];
  }
  const gone = w.versionsUnder(versionPrefix(key, gen)).map((v) => (w.removeVersion(v.key), v.value.version));
  if (w.deleted(key)?.gen === gen) w.removeDeleted(key);
  return gone;
}

/** Everything of a scope: live secrets, kept versions, deleted secrets (purge, uninstall --purge). Answers how many live secrets went. */
export function destroyScope(w: VaultWriter, scope: string): number {
  let live = 0;
  for (const { key } of w.listScope(scope)) {
    w.removeSecret(key);
    live++;
  }
  for (const v of w.versionsUnder(`${scope}${SEP}`)) w.removeVersion(v.key);
  for (const { key } of w.listDeleted(scope)) w.removeDeleted(key);
  return live;
}

/** The deleted secret back as it was (its version unchanged); 409 naming the live one when its name was created again. */
export function undelete(w: VaultWriter, key: string): SecretRecord {
  const name = nameOf(key);
  const d = deletedOf(w, key);
  if (!d) throw new PierError('NOT_FOUND', `no deleted secret "${name}"`);
  const live = w.secret(key);
  if (live) throw new PierError('CONFLICT', `secret "${name}" exists again (version ${live.version}, created ${live.createdAt} by ${live.createdBy}): delete it first to undelete the earlier one`, { data: { version: live.version } });
  const vkey = versionKey(key, d.gen, d.version);
  const last = w.version(vkey);
  if (!last) {
    w.removeDeleted(key);
    throw new PierError('NOT_FOUND', `the value of deleted secret "${name}" is no longer kept`);
  }
  const record: SecretRecord = {
    ...secretFormatOf(last.sealed),
    gen: d.gen,
    sealed: last.sealed,
    size: { version: d.version, bytes: sealedSize(last.sealed) },
    version: d.version,
    createdAt: d.createdAt,
    createdBy: d.createdBy,
    updatedAt: d.updatedAt,
    updatedBy: d.updatedBy,
    history: d.history,
  };
  // The secret first: a write cut short leaves it live beside a stale deleted record (deletedOf), never lost.
  w.putSecret(key, record);
  w.removeDeleted(key);
  w.removeVersion(vkey);
  return record;
}

/**
 * Destroys one earlier version (`version`: of the live secret, or of the deleted one when none is
 * live), or without `version` the deleted secret whole. Its bytes go from the store (and on
 * JetStream from the stream: store-jetstream-write.ts). Answers the versions destroyed.
 */
export function destroy(w: VaultWriter, key: string, version: number | undefined): number[] {
  const name = nameOf(key);
  const live = w.secret(key);
  const d = deletedOf(w, key);
  if (version === undefined) {
    if (!d) throw new PierError(live ? 'CONFLICT' : 'NOT_FOUND', live ? `secret "${name}" is not deleted: delete it first, or name --version to destroy an earlier version` : `no deleted secret "${name}"`);
    return destroyGeneration(w, key, d.gen);
  }
  const target = live ?? d;
  if (!target) throw new PierError('NOT_FOUND', `secret "${name}" not found`);
  const gen = genOf(target);
  if (live && version === live.version) throw new PierError('CONFLICT', `version ${version} of "${name}" is the current one: update or delete the secret first`);
  if (!live && d && version === d.version) return destroyGeneration(w, key, gen);
  const vkey = versionKey(key, gen, version);
  if (!w.version(vkey)) throw notKept(w, key, gen, name, version);
  w.removeVersion(vkey);
  return [version];
}

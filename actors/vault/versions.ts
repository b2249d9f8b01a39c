import { randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import type { OperatorVaultAnswers } from '../../bus/subjects.js';
import { appAccount, genOf, nameOf, payerOf, scopeAccount, scopeOf, sealedSize, secretFormatOf, sizeOf, versionFormatOf, userOf, versionBytes, versionKey, versionPrefix, type DeletedRecord, type SecretRecord, type SecretVersion, type VaultStore, type VaultWriter, type VersionRecord } from './store.js';

// Versions, soft delete, restore, undelete and destroy (docs/vault.md "Versions"). Every function
// here runs inside one store write (`w`) with the change it belongs to: a version is kept, trimmed
// or destroyed in the same commit as the secret that moved past it.

const SEP = '\u0000';

/** The operator's bounds (PIER_VAULT_VERSIONS, _HISTORY_SCOPE_BYTES, _HISTORY_USER_BYTES, _DELETED_DAYS). */
export interface VersionBounds {
  /** Earlier versions kept per secret (a deleted secret's last value counts as one). */
  perSecret: number;
  /**
   * Bytes of kept versions one app's writes keep (store.ts payerOf), per (user, workspace, env)
   * and per user: the scope's keeps one workspace from taking all of the user's; the user's bounds
   * the disk (docs/vault.md "Versions").
   */
  scopeBytes: number;
  appBytes: number;
  /** How long a deleted secret stays recoverable. */
  deletedForMs: number;
  /**
   * How old a secret's earlier record must be before the store erases it (JetStream: the secrets
   * bucket's history; VaultStore.scrub): a writer racing it may still be reading it for that long.
   */
  scrubAfterMs: number;
}

/** A fresh generation: a secret created (again) never shows an earlier creation's versions. */
export const newGen = (): string => randomBytes(6).toString('hex');

/**
 * The deleted copy of a name, unless it is the live secret's own generation: a delete or an
 * undelete cut short between its commits (JetStream commits a write's changes one by one) leaves
 * both; the live one is the truth, and the stale deleted record is ignored (and removed when next
 * written).
 */
export function deletedOf(r: Pick<VaultWriter, 'secret' | 'deleted'>, key: string): DeletedRecord | undefined {
  const d = r.deleted(key);
  if (!d) return undefined;
  const live = r.secret(key);
  return live && genOf(live) === d.gen ? undefined : d;
}

/** The history entry of a record's current version, as it becomes an earlier one. */
export const entryOf = (r: SecretRecord): SecretVersion => {
  const size = sizeOf(r);
  return { version: r.version, at: r.updatedAt, by: r.updatedBy, ...(size === undefined ? {} : { size }) };
};

/** Metadata entries kept in a record (the values kept are bounded apart, by `perSecret`). */
const HISTORY_ENTRIES = 100;

/**
 * Keeps `record`'s current value as an earlier version of its secret (key `key`), counted against
 * `keptBy` (the app, or the operator, whose write moves past it), then applies the bounds. A
 * version already kept (a write retried after a crash between its two commits) stays.
 */
export function keepVersion(w: VaultWriter, bounds: VersionBounds, key: string, record: SecretRecord, keptBy: string): void {
  const vkey = versionKey(key, genOf(record), record.version);
  if (!w.version(vkey)) w.putVersion(vkey, { ...versionFormatOf(record.sealed), sealed: record.sealed, version: record.version, at: record.updatedAt, by: record.updatedBy, keptBy });
  trim(w, bounds, key, genOf(record), keptBy, record.version);
}

/** The record after `record`, its value `sealed` (an update or a restore): its current version becomes history. */
export function nextRecord(record: SecretRecord, sealed: Uint8Array, by: string, at: string): SecretRecord {
  const version = record.version + 1;
  return {
    ...record,
    ...secretFormatOf(sealed),
    gen: genOf(record),
    sealed,
    size: { version, bytes: sealedSize(sealed) },
    version,
    updatedAt: at,
    updatedBy: by,
    history: [...record.history, entryOf(record)].slice(-HISTORY_ENTRIES),
  };
}

/**
 * The bounds, oldest first: versions of this generation past `perSecret`, then `writer`'s bytes in
 * the secret's scope and for its user. Never a reason to refuse the write that called it. Over a
 * byte bound only `writer`'s own versions in this scope go (the one just kept included): never
 * another app's, never another workspace's, so no app's writes trim or crowd out another's
 * history (docs/vault.md "Versions"). A deleted secret whose last value goes is gone with it
 * (nothing is left to undelete).
 */
export function trim(w: VaultWriter, bounds: VersionBounds, key: string, gen: string, writer: string, newest?: number): void {
  // A generation's versions are numbered from 1 up, never reused: with `newest` within the bound,
  // it cannot hold more than the bound (most secrets: their count is never read).
  if (newest === undefined || newest > bounds.perSecret) {
    const own = w.versionKeysUnder(versionPrefix(key, gen));
    for (const vkey of own.slice(0, Math.max(0, own.length - bounds.perSecret))) removeKept(w, vkey);
  }
  const scope = scopeOf(key);
  for (const [account, limit] of [
    [scopeAccount(scope, writer), bounds.scopeBytes],
    [appAccount(userOf(key), writer), bounds.appBytes],
  ] as const) {
    let over = w.accountBytes(account) - limit;
    if (over <= 0) continue;
    // Only a full account pays for this scan. Before the write the account was within its bound
    // and the write added only to it, here: so this scope holds enough of the writer's own to
    // bring it back (unless the bound was lowered since; then it comes back as the writer writes).
    const oldest = w.versionsUnder(`${scope}${SEP}`).filter((v) => payerOf(v.value) === writer).sort((a, b) => (a.value.at < b.value.at ? -1 : a.value.at > b.value.at ? 1 : 0));
    for (const v of oldest) {
      if (over <= 0) break;
      removeKept(w, v.key);
      over -= versionBytes(v.value);
    }
  }
}

/** Removes one kept version; a deleted secret whose last value it was goes too. */
function removeKept(w: VaultWriter, vkey: string): void {
  w.removeVersion(vkey);
  const [key, gen, version] = splitVersionKey(vkey);
  const d = deletedOf(w, key);
  if (d && d.gen === gen && d.version === version) w.removeDeleted(key);
}

/** `versionKey`'s parts: the secret key, the generation, the version. */
export function splitVersionKey(vkey: string): [string, string, number] {
  const last = vkey.lastIndexOf(SEP);
  const genAt = vkey.lastIndexOf(SEP, last - 1);
  return [vkey.slice(0, genAt), vkey.slice(genAt + 1, last), Number(vkey.slice(last + 1))];
}

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

/**
 * The restore of `version` of a live secret: a new version whose value is that one's, copied by
 * `copy` (values.ts reseal: a value under a value key of its own is sealed anew, so no two versions
 * share a key, and destroying one never erases another's).
 */
export function restore(w: VaultWriter, bounds: VersionBounds, key: string, version: number, by: string, at: string, copy: (sealed: Uint8Array) => Uint8Array): SecretRecord {
  const name = nameOf(key);
  const live = w.secret(key);
  if (!live) {
    if (w.deleted(key)) throw new PierError('CONFLICT', `secret "${name}" is deleted: undelete it first`);
    throw new PierError('NOT_FOUND', `secret "${name}" not found`);
  }
  if (version === live.version) throw new PierError('CONFLICT', `version ${version} of "${name}" is the current one`);
  const kept = w.version(versionKey(key, genOf(live), version));
  if (!kept) throw notKept(w, key, genOf(live), name, version);
  keepVersion(w, bounds, key, live, by);
  const next = nextRecord(live, copy(kept.sealed), by, at);
  w.putSecret(key, next);
  return next;
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
 * JetStream from the stream: store-jetstream.ts). Answers the versions destroyed.
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

function notKept(w: VaultWriter, key: string, gen: string, name: string, version: number): PierError {
  const kept = w.versionsUnder(versionPrefix(key, gen)).map((v) => v.value.version);
  return new PierError('NOT_FOUND', `version ${version} of "${name}" is not kept (kept: ${kept.length ? kept.join(', ') : 'none'})`);
}

/** One version in a listing (bus/subjects-vault.ts OperatorVaultAnswers): never a value. */
export type VersionRow = OperatorVaultAnswers['versions']['versions'][number];

/** The versions of the secret at `key`, live or deleted, newest first; null when it is neither. */
export function listVersions(store: VaultStore, key: string, which: 'live-or-deleted' | 'deleted' = 'live-or-deleted'): { version: number; versions: VersionRow[]; deleted: { at: string; by: string } | null } | null {
  // `deleted`: the deleted copy even when the name was created again (a live secret beside it).
  const live = which === 'deleted' ? undefined : store.secret(key);
  const d = live ? undefined : deletedOf(store, key);
  const record = live ?? d;
  if (!record) return null;
  const gen = genOf(record);
  const keptAt = (v: number) => store.version(versionKey(key, gen, v));
  const row = (v: SecretVersion): VersionRow => {
    const kept = keptAt(v.version);
    return { version: v.version, at: v.at, by: v.by, size: v.size ?? (kept ? sealedSize(kept.sealed) : null), current: false, kept: kept !== undefined };
  };
  const head: VersionRow = live
    ? { version: live.version, at: live.updatedAt, by: live.updatedBy, size: sizeOf(live) ?? sealedSize(live.sealed), current: true, kept: true }
    : { ...row({ version: d!.version, at: d!.updatedAt, by: d!.updatedBy }), current: false };
  return { version: record.version, versions: [head, ...record.history.map(row).reverse()], deleted: d ? { at: d.deletedAt, by: d.deletedBy } : null };
}

/** A deleted secret in a listing (OperatorVaultAnswers). */
export type DeletedRow = OperatorVaultAnswers['deleted'][number];

export function listDeleted(store: VaultStore, scope: string, bounds: VersionBounds): DeletedRow[] {
  return store.listDeleted(scope).filter(({ key }) => deletedOf(store, key)).map(({ key, value: d }) => ({
    name: nameOf(key),
    version: d.version,
    deletedAt: d.deletedAt,
    deletedBy: d.deletedBy,
    destroyAt: new Date(Date.parse(d.deletedAt) + bounds.deletedForMs).toISOString(),
    versionsKept: deletedVersions(store, key, d).length - 1,
  }));
}

const deletedVersions = (store: VaultStore, key: string, d: DeletedRecord): VersionRecord[] =>
  [...d.history.map((h) => h.version), d.version].flatMap((v) => store.version(versionKey(key, d.gen, v)) ?? []);

/**
 * Kept versions whose secret is neither live nor deleted in their generation: a 0.2 replica's delete
 * during a rolling upgrade removes the record alone. At most `limit`; the sweep removes them.
 */
export function orphanVersions(store: VaultStore, limit: number): string[] {
  const out: string[] = [];
  for (const { key: vkey } of store.everything().versions) {
    if (!isOrphan(store, vkey)) continue;
    out.push(vkey);
    if (out.length >= limit) break;
  }
  return out;
}

/** Whether a kept version's generation is neither the live secret's nor the deleted one's (read through `r`, a store or a write). */
export function isOrphan(r: Pick<VaultStore, 'secret' | 'deleted'>, vkey: string): boolean {
  const [key, gen] = splitVersionKey(vkey);
  const live = r.secret(key);
  return !((live && genOf(live) === gen) || r.deleted(key)?.gen === gen);
}

/** Deleted secrets past the window, at most `limit` (the sweep destroys them a batch at a time). */
export function expiredDeleted(store: VaultStore, bounds: VersionBounds, now: number, limit: number): Array<{ key: string; gen: string }> {
  const out: Array<{ key: string; gen: string }> = [];
  for (const { key, value } of store.listDeleted()) {
    if (Date.parse(value.deletedAt) + bounds.deletedForMs > now) continue;
    out.push({ key, gen: value.gen });
    if (out.length >= limit) break;
  }
  return out;
}

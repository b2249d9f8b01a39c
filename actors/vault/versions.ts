import { randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import { appAccount, genOf, nameOf, payerOf, scopeAccount, scopeOf, sealedSize, secretFormatOf, sizeOf, versionFormatOf, userOf, versionBytes, versionKey, versionPrefix, type DeletedRecord, type SecretRecord, type SecretVersion, type VaultWriter } from './store.js';

// Versions (docs/vault.md "Versions"): what a write keeps of the value it moves past, the bounds, and
// the restore of an earlier one. Every function here runs inside one store write (`w`) with the change
// it belongs to: a version is kept, trimmed or destroyed in the same commit as the secret that moved
// past it. Soft delete, undelete and destroy are versions-deleted.ts; listings and the sweep's finds,
// versions-read.ts.

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

/** The 404 of a version not kept, naming those that are. */
export function notKept(w: VaultWriter, key: string, gen: string, name: string, version: number): PierError {
  const kept = w.versionsUnder(versionPrefix(key, gen)).map((v) => v.value.version);
  return new PierError('NOT_FOUND', `version ${version} of "${name}" is not kept (kept: ${kept.length ? kept.join(', ') : 'none'})`);
}

import type { OperatorVaultAnswers } from '../../bus/subjects.js';
import { genOf, nameOf, sealedSize, sizeOf, versionKey, type DeletedRecord, type SecretVersion, type VaultStore, type VersionRecord } from './store.js';
import { deletedOf, splitVersionKey, type VersionBounds } from './versions.js';

// What reads find of versions and deleted secrets (docs/vault.md "Versions"): the listings, and what
// the hourly sweep removes (orphaned versions, deleted secrets past their window).

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

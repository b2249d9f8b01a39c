import type { Database, RootDatabase } from 'lmdb';
import { durably } from '../../lib/state/lmdb-durable.js';
import type { LmdbAudit } from './audit-lmdb.js';
import type { DecodedCache } from './decoded-cache.js';
import { accountsOf, versionBytes, type DataKeyRecord, type DeletedRecord, type SecretRecord, type VaultStore, type VaultWriter, type VersionRecord } from './store.js';
import { erasingUnusedValueKeys } from './value-key-erasure.js';
import type { ValueKeySlots } from './value-key-slots.js';

// A write on the LMDB store (store-lmdb.ts): one transaction, synced before it is answered, with the
// value keys it erased zeroed on disk before the answer too (docs/vault.md "Destroyed").

/** The LMDB store's databases, and the read caches its changes go through. */
export interface LmdbVaultParts {
  root: RootDatabase;
  dataKeys: Database<DataKeyRecord, string>;
  secrets: Database<SecretRecord, string>;
  versions: Database<VersionRecord, string>;
  deleted: Database<DeletedRecord, string>;
  /** Bytes of kept versions per account (accountsOf), kept in the same transactions as the versions. */
  usage: Database<number, string>;
  slots: ValueKeySlots;
  audit: LmdbAudit;
  /** Reads of data keys and secrets: decoded once while their stored bytes stay the same. */
  dataKeyReads: DecodedCache<DataKeyRecord>;
  secretReads: DecodedCache<SecretRecord>;
  /** The store's own range reads, which a write's reads share. */
  reads: Pick<VaultStore, 'listScope' | 'scopesOf' | 'listDeleted'>;
}

/** Adds (`sign` 1) or takes away (-1) version `v`'s bytes in its accounts (inside a write). */
function countVersion(usage: Database<number, string>, vkey: string, v: VersionRecord, sign: 1 | -1): void {
  for (const k of accountsOf(vkey, v)) {
    const next = (usage.get(k) ?? 0) + sign * versionBytes(v);
    if (next > 0) usage.put(k, next);
    else usage.remove(k);
  }
}

/**
 * Versions kept before the accounts were counted (a store of an earlier 0.3 build) are counted
 * once, at the first open that finds them uncounted; every later change counts in its own write.
 */
export function countExistingVersions(p: Pick<LmdbVaultParts, 'root' | 'usage' | 'versions'>): void {
  p.root.transactionSync(() => {
    if (p.usage.getCount() > 0) return;
    for (const { key, value } of p.versions.getRange()) countVersion(p.usage, key, value, 1);
  });
}

/** What a write may do, on the databases themselves (inside the write's transaction). */
function writerOn(p: LmdbVaultParts): VaultWriter {
  return {
    dataKey: (scope) => p.dataKeys.get(scope),
    dataKeys: () => [...p.dataKeys.getRange()].map(({ key, value }) => ({ scope: key, record: value })),
    // Changes go through the read caches, which let go of the key at once (a deleted or purged
    // secret's record, the value opened from it and its scope's data key are not kept on).
    putDataKey: (scope, record) => p.dataKeyReads.put(scope, record),
    removeDataKey: (scope) => p.dataKeyReads.remove(scope),
    secret: (key) => p.secrets.get(key),
    putSecret: (key, record) => p.secretReads.put(key, record),
    removeSecret: (key) => p.secretReads.remove(key),
    listScope: (scope) => p.reads.listScope(scope),
    scopesOf: (user, workspace) => p.reads.scopesOf(user, workspace),
    appendAudit: (entry) => p.audit.put(entry),
    version: (vkey) => p.versions.get(vkey),
    putVersion: (vkey, record) => {
      const before = p.versions.get(vkey);
      if (before) countVersion(p.usage, vkey, before, -1);
      countVersion(p.usage, vkey, record, 1);
      p.versions.put(vkey, record);
    },
    removeVersion: (vkey) => {
      const before = p.versions.get(vkey);
      if (!before) return;
      countVersion(p.usage, vkey, before, -1);
      p.versions.remove(vkey);
    },
    versionsUnder: (prefix) => [...p.versions.getRange({ start: prefix, end: `${prefix}\uffff` })].map(({ key, value }) => ({ key, value })),
    versionKeysUnder: (prefix) => [...p.versions.getKeys({ start: prefix, end: `${prefix}\uffff` })],
    accountBytes: (k) => p.usage.get(k) ?? 0,
    deleted: (key) => p.deleted.get(key),
    putDeleted: (key, record) => void p.deleted.put(key, record),
    removeDeleted: (key) => void p.deleted.remove(key),
    listDeleted: (scope) => p.reads.listDeleted(scope),
    valueKey: (id) => p.slots.get(id),
    putValueKey: (id, record) => p.slots.put(id, record),
    removeValueKey: (id) => p.slots.remove(id),
  };
}

/** `fn` in one transaction, answered once it is on disk and the value keys it erased are zeros there. */
export async function commitLmdb<T>(p: LmdbVaultParts, fn: (w: VaultWriter) => T): Promise<T> {
  const w = writerOn(p);
  const run = erasingUnusedValueKeys(fn);
  const result = await durably(
    p.root,
    p.root.transaction(() => {
      const r = run(w);
      p.slots.beforeCommit();
      return r;
    }),
  );
  // A destroyed value's key is zeros on disk before the destroy is answered (docs/vault.md "Destroyed").
  await p.slots.zeroErased();
  return result;
}

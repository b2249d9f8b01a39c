import { traced } from '../../bus/trace.js';
import { join } from 'node:path';
import { open } from 'lmdb';
import { openRecords } from '../../lib/state/record-format.js';
import type { AuditEntry, AuditPage, AuditQuery } from '../../bus/subjects.js';
import { DecodedCache } from './decoded-cache.js';
import { settleLmdbFolder } from '../../lib/state/durable-files.js';
import { ValueKeySlots } from './value-key-slots.js';
import { LmdbAudit } from './audit-lmdb.js';
import { commitLmdb, countExistingVersions, type LmdbVaultParts } from './store-lmdb-write.js';
import type { DataKeyRecord, DeletedRecord, SecretRecord, ValueKeyRecord, VaultStore, VaultWriter, VersionRecord } from './store.js';

const SEP = '\u0000';

/**
 * The vault in LMDB (`<data>/vault`). Replicas on one host share the environment: LMDB serialises
 * their write transactions. Audit entries are keyed `[ms, replica, seq]`, so replicas never collide
 * (audit-lmdb.ts). A write is store-lmdb-write.ts's.
 */
export class LmdbVaultStore implements VaultStore {
  /** Reads of data keys and secrets: decoded once while their stored bytes stay the same. */
  private readonly dataKeyReads: DecodedCache<DataKeyRecord>;
  private readonly secretReads: DecodedCache<SecretRecord>;
  private readonly parts: LmdbVaultParts;

  private constructor(db: Omit<LmdbVaultParts, 'dataKeyReads' | 'secretReads' | 'reads'>) {
    this.dataKeyReads = new DecodedCache(db.dataKeys);
    this.secretReads = new DecodedCache(db.secrets);
    this.parts = { ...db, dataKeyReads: this.dataKeyReads, secretReads: this.secretReads, reads: this };
  }

  static open(path: string, replica: string): LmdbVaultStore {
    const root = open({ path, compression: false });
    // The environment's folder and files, made by this open the first time, are on disk before any write is answered.
    settleLmdbFolder(path);
    const store = new LmdbVaultStore({
      root,
      dataKeys: openRecords<DataKeyRecord>(root, 'data-keys', 'vaultDataKey'),
      secrets: openRecords<SecretRecord>(root, 'secrets', 'vaultSecret'),
      audit: new LmdbAudit(root, openRecords<AuditEntry, [number, string, number]>(root, 'audit', 'audit'), replica),
      versions: openRecords<VersionRecord>(root, 'versions', 'vaultVersion'),
      deleted: openRecords<DeletedRecord>(root, 'deleted', 'vaultDeleted'),
      // Not `version-usage`, which counted per scope and per user, whoever wrote: those counts mean nothing here.
      usage: root.openDB<number, string>({ name: 'version-accounts' }),
      // Beside the environment, where a key can be overwritten in place (value-key-slots.ts).
      slots: new ValueKeySlots(root, join(path, 'value-keys.slots')),
    });
    countExistingVersions(store.parts);
    store.parts.slots.zeroErasedNow();
    return store;
  }

  /**
   * One environment shared by the replicas of a host: nothing to catch up with, nothing to wait for. (lmdb-js renews its
   * read snapshot at the next timer turn, so another process's commit shows within about 1 ms;
   * renewing it by hand here, with resetReadTxn, was tried and made a single process read stale
   * upload records under CI load, so it is not done.)
   */
  sync(): undefined {
    return undefined;
  }

  dataKey(scope: string): DataKeyRecord | undefined {
    return this.dataKeyReads.get(scope);
  }

  secret(key: string): SecretRecord | undefined {
    return this.secretReads.get(key);
  }

  listScope(scope: string): Array<{ key: string; value: SecretRecord }> {
    return [...this.parts.secrets.getRange({ start: `${scope}${SEP}`, end: `${scope}${SEP}\uffff` })];
  }

  scopesOf(user: string, workspace: string): string[] {
    const prefix = `${user}${SEP}${workspace}${SEP}`;
    return [...this.parts.dataKeys.getKeys({ start: prefix, end: `${prefix}\uffff` })];
  }

  version(vkey: string): VersionRecord | undefined {
    return this.parts.versions.get(vkey);
  }

  deleted(key: string): DeletedRecord | undefined {
    return this.parts.deleted.get(key);
  }

  listDeleted(scope?: string): Array<{ key: string; value: DeletedRecord }> {
    return [...this.parts.deleted.getRange(scope === undefined ? {} : { start: `${scope}${SEP}`, end: `${scope}${SEP}\uffff` })];
  }

  valueKey(id: string): ValueKeyRecord | undefined {
    return this.parts.slots.get(id);
  }

  reserveValueKey(id: string, record: ValueKeyRecord): Promise<void> {
    return this.parts.slots.reserve(id, record);
  }

  everything() {
    const { dataKeys, secrets, versions, deleted, slots } = this.parts;
    return {
      dataKeys: [...dataKeys.getRange()].map(({ key, value }) => ({ scope: key, record: value })),
      secrets: [...secrets.getRange()].map(({ key, value }) => ({ key, value })),
      versions: [...versions.getRange()].map(({ key, value }) => ({ key, value })),
      deleted: [...deleted.getRange()].map(({ key, value }) => ({ key, value })),
      valueKeys: slots.all(),
    };
  }

  readAudit(q: AuditQuery, scanMax?: number): Promise<AuditPage> {
    return this.parts.audit.read(q, scanMax);
  }

  write<T>(fn: (w: VaultWriter) => T): Promise<T> {
    // A span of the request's trace while it is durable (docs/operations.md "Tracing").
    return traced('lmdb commit', 'internal', () => commitLmdb(this.parts, fn), { 'db.system': 'lmdb' });
  }

  appendAudit(entries: AuditEntry[], prepared?: readonly unknown[]): Promise<void> {
    return this.parts.audit.append(entries, prepared as ReadonlyArray<Buffer | undefined> | undefined);
  }

  prepareAudit(entry: AuditEntry): Buffer | undefined {
    return this.parts.audit.prepare(entry);
  }

  /** Deletes in transactions of a bounded size, so a large backlog never holds one huge write. */
  pruneAudit(before: number, maxEntries: number): Promise<number> {
    return this.parts.audit.prune(before, maxEntries);
  }

  async close(): Promise<void> {
    await this.parts.root.close();
    this.parts.slots.close();
  }
}

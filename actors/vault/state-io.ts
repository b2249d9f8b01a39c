import { PierError } from '../../bus/errors.js';
import type { StatePage, StateRecord } from '../../bus/subjects.js';
import type { DataKeyRecord, DeletedRecord, SecretRecord, ValueKeyRecord, VaultStore, VersionRecord } from './store.js';
import type { Keyring } from '../../lib/crypto/keyring.js';
import { checkImportKey } from '../../lib/crypto/master-key-check.js';

/** Audit entries carried by an export: the newest ones (the rest stay where they are, under their retention). */
export const EXPORTED_AUDIT = 100_000;

/**
 * Every record of the vault, in a stable order: data keys, value keys, secrets, then audit entries
 * (oldest first). A value key comes before the records sealed under it, as a write keeps them.
 */
export async function vaultRecords(store: VaultStore): Promise<StateRecord[]> {
  const { dataKeys, secrets, versions, deleted, valueKeys } = store.everything();
  const audit = (await store.readAudit({ limit: EXPORTED_AUDIT }, EXPORTED_AUDIT)).entries.reverse();
  return [
    ...dataKeys.map((d): StateRecord => ({ kind: 'dataKey', key: d.scope, value: d.record as unknown as Record<string, unknown> })),
    ...valueKeys.map((k): StateRecord => ({ kind: 'valueKey', key: k.id, value: k.value as unknown as Record<string, unknown> })),
    ...secrets.map((s): StateRecord => ({ kind: 'secret', key: s.key, value: s.value as unknown as Record<string, unknown> })),
    ...versions.map((v): StateRecord => ({ kind: 'version', key: v.key, value: v.value as unknown as Record<string, unknown> })),
    ...deleted.map((d): StateRecord => ({ kind: 'deleted', key: d.key, value: d.value as unknown as Record<string, unknown> })),
    ...audit.map((value): StateRecord => ({ kind: 'audit', value })),
  ];
}

export async function vaultExportPage(store: VaultStore, offset: number, limit: number): Promise<StatePage> {
  const all = await vaultRecords(store);
  return { records: all.slice(offset, offset + limit), done: offset + limit >= all.length };
}

/** Writes a batch of exported records as they are (sealed values, wrapped keys); other kinds are the registry's. */
export async function vaultImportBatch(store: VaultStore, records: StateRecord[], keyring: Keyring): Promise<{ imported: number }> {
  // Wrapped under another master key: refused before anything of the batch is written.
  checkImportKey(keyring, records.flatMap((r) => (r.kind === 'dataKey' && (r.value as unknown as DataKeyRecord).wrapped instanceof Uint8Array ? [{ what: `data key ${r.key}`, value: (r.value as unknown as DataKeyRecord).wrapped }] : [])));
  let imported = 0;
  await store.write((w) => {
    for (const r of records) {
      if (r.kind === 'dataKey') {
        const v = r.value as unknown as DataKeyRecord;
        if (!(v.wrapped instanceof Uint8Array)) throw new PierError('BAD_REQUEST', `dataKey ${JSON.stringify(r.key)}: wrapped must be bytes`);
        w.putDataKey(r.key, v);
      } else if (r.kind === 'valueKey') {
        const v = r.value as unknown as ValueKeyRecord;
        if (typeof r.key !== 'string' || !/^[0-9a-f]{32}$/.test(r.key)) throw new PierError('BAD_REQUEST', `valueKey ${JSON.stringify(r.key)}: the key must be 32 hex digits`);
        if (!(v.wrapped instanceof Uint8Array) || v.wrapped.byteLength > 96) throw new PierError('BAD_REQUEST', `valueKey ${r.key}: wrapped must be bytes (at most 96)`);
        // A key already held is never replaced (its values would open no more): the same bytes again are a no-op.
        const held = w.valueKey(r.key);
        if (held && !Buffer.from(held.wrapped).equals(Buffer.from(v.wrapped))) throw new PierError('CONFLICT', `valueKey ${r.key}: a different key is held under this id`);
        // Written now: the sweep of keys no record names leaves it alone while the records sealed under it come in later batches.
        if (!held) w.putValueKey(r.key, { format: 1, wrapped: v.wrapped, at: Date.now() });
      } else if (r.kind === 'secret') {
        const v = r.value as unknown as SecretRecord;
        if (!(v.sealed instanceof Uint8Array) || typeof v.version !== 'number') throw new PierError('BAD_REQUEST', `secret ${JSON.stringify(r.key)}: sealed and version are required`);
        w.putSecret(r.key, v);
      } else if (r.kind === 'version') {
        const v = r.value as unknown as VersionRecord;
        if (!(v.sealed instanceof Uint8Array) || typeof v.version !== 'number') throw new PierError('BAD_REQUEST', `version ${JSON.stringify(r.key)}: sealed and version are required`);
        w.putVersion(r.key, v);
      } else if (r.kind === 'deleted') {
        const v = r.value as unknown as DeletedRecord;
        if (typeof v.gen !== 'string' || typeof v.version !== 'number' || !Array.isArray(v.history)) throw new PierError('BAD_REQUEST', `deleted ${JSON.stringify(r.key)}: gen, version and history are required`);
        w.putDeleted(r.key, v);
      } else if (r.kind === 'audit') {
        w.appendAudit(r.value);
      } else continue;
      imported++;
    }
  });
  return { imported };
}

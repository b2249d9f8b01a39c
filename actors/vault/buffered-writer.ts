import type { AuditEntry } from '../../bus/subjects.js';
import type { BucketView } from './bucket-view.js';
import { accountsOf, versionBytes, type DataKeyRecord, type DeletedRecord, type SecretRecord, type ValueKeyRecord, type VaultWriter, type VersionRecord } from './store.js';
import type { VersionUsage } from './version-usage.js';

const SEP = '\u0000';

/** A change buffered by a write, committed later as an intent naming the revision it read (see BucketView). */
export interface Op {
  view: BucketView<unknown>;
  key: string;
  /** The new value; undefined: a delete. */
  value: unknown;
  /** The key's revision when read: its last accepted write or delete (0: never written). */
  expected: number;
  /** The key's value at `expected` (undefined: absent): what an attempt that lost puts back (store-jetstream-write.ts). */
  before: () => unknown;
  /**
   * Already durable with this very value (a value key reserved ahead: value-key-pool.ts): committing
   * it is a no-op, yet it is this write's change (a key the write does not land with is a stray).
   */
  held?: true;
}

/** The vault's buckets on JetStream, as views (store-jetstream.ts). */
export interface VaultViews {
  keys: BucketView<DataKeyRecord>;
  secrets: BucketView<SecretRecord>;
  versions: BucketView<VersionRecord>;
  deleted: BucketView<DeletedRecord>;
  valueKeys: BucketView<ValueKeyRecord>;
  /** Bytes of kept versions per account (store.ts accountsOf), as the versions view shows them. */
  usage: VersionUsage;
}

/**
 * A VaultWriter that changes nothing yet: it reads the views through the changes buffered so far
 * (so `fn` sees its own writes), and buffers each change with the revision its key had when first
 * touched in this write: that is the revision the commit names, whatever `fn` did to it since.
 */
export function bufferedWriter(views: VaultViews, ops: Op[], audit: AuditEntry[]): VaultWriter {
  const { keys, secrets, versions, deleted, valueKeys } = views;
  const read = <T>(view: BucketView<T>, key: string): T | undefined => {
    for (let i = ops.length - 1; i >= 0; i--) if (ops[i].view === view && ops[i].key === key) return ops[i].value as T | undefined;
    return view.entries.get(key)?.value;
  };
  const change = <T>(view: BucketView<T>, key: string, value: T | undefined) => {
    const first = ops.find((o) => o.view === view && o.key === key);
    if (first) return void ops.push({ ...first, value });
    // The held entry, not its value: a value of a later format throws only if it is put back.
    const held = view.entries.get(key);
    ops.push({ view: view as BucketView<unknown>, key, value, expected: view.revisionOf(key), before: () => held?.value });
  };
  const liveKeys = (view: BucketView<unknown>, prefix: string) => {
    const found = new Set([...view.entries.keys()].filter((k) => k.startsWith(prefix)));
    for (const op of ops) if (op.view === view && op.key.startsWith(prefix)) (op.value === undefined ? found.delete(op.key) : found.add(op.key));
    return [...found].sort();
  };
  /** The view's usage of an account, moved by what this write has buffered so far (each key counted at its latest buffered value). */
  const accountBytes = (account: string) => {
    const counted = (key: string, v: VersionRecord | undefined) => (v && accountsOf(key, v).includes(account) ? versionBytes(v) : 0);
    let bytes = views.usage.bytes(account);
    const touched = new Set(ops.filter((o) => o.view === (versions as BucketView<unknown>)).map((o) => o.key));
    for (const key of touched) bytes += counted(key, read(versions, key)) - counted(key, versions.entries.get(key)?.value);
    return bytes;
  };
  return {
    dataKey: (scope) => read(keys, scope),
    dataKeys: () => [...keys.entries.keys()].map((scope) => ({ scope, record: read(keys, scope)! })).filter((e) => e.record !== undefined),
    putDataKey: (scope, record) => change(keys, scope, record),
    removeDataKey: (scope) => change(keys, scope, undefined),
    secret: (key) => read(secrets, key),
    putSecret: (key, record) => change(secrets, key, record),
    removeSecret: (key) => change(secrets, key, undefined),
    listScope: (scope) => liveKeys(secrets as BucketView<unknown>, `${scope}${SEP}`).map((key) => ({ key, value: read(secrets, key)! })),
    scopesOf: (user, workspace) => liveKeys(keys as BucketView<unknown>, `${user}${SEP}${workspace}${SEP}`),
    appendAudit: (entry) => void audit.push(entry),
    version: (vkey) => read(versions, vkey),
    putVersion: (vkey, record) => change(versions, vkey, record),
    removeVersion: (vkey) => change(versions, vkey, undefined),
    versionsUnder: (prefix) => liveKeys(versions as BucketView<unknown>, prefix).map((key) => ({ key, value: read(versions, key)! })),
    versionKeysUnder: (prefix) => liveKeys(versions as BucketView<unknown>, prefix),
    accountBytes,
    deleted: (key) => read(deleted, key),
    putDeleted: (key, record) => change(deleted, key, record),
    removeDeleted: (key) => change(deleted, key, undefined),
    listDeleted: (scope) => liveKeys(deleted as BucketView<unknown>, `${scope}${SEP}`).map((key) => ({ key, value: read(deleted, key)! })),
    valueKey: (id) => read(valueKeys, id),
    putValueKey: (id, record) => {
      const kept = valueKeys.entries.get(id)?.value;
      const touched = ops.some((o) => o.view === (valueKeys as BucketView<unknown>) && o.key === id);
      if (!kept || touched || !Buffer.from(kept.wrapped).equals(record.wrapped)) return change(valueKeys, id, record);
      ops.push({ view: valueKeys as BucketView<unknown>, key: id, value: record, expected: valueKeys.revisionOf(id), before: () => kept, held: true });
    },
    removeValueKey: (id) => change(valueKeys, id, undefined),
  };
}

import type { AuditEntry } from '../../bus/subjects.js';
import type { BucketView } from './bucket-view.js';
import type { DataKeyRecord, SecretRecord, VaultWriter } from './store.js';

const SEP = '\u0000';

/** A change buffered by a write, committed later as an intent naming the revision it read (see BucketView). */
export interface Op {
  view: BucketView<unknown>;
  key: string;
  /** The new value; undefined: a delete. */
  value: unknown;
  /** The key's revision when read: its last accepted write or delete (0: never written). */
  expected: number;
}

/**
 * A VaultWriter that changes nothing yet: it reads the views through the changes buffered so far
 * (so `fn` sees its own writes), and buffers each change with the revision its key had when first
 * touched in this write: that is the revision the commit names, whatever `fn` did to it since.
 */
export function bufferedWriter(keys: BucketView<DataKeyRecord>, secrets: BucketView<SecretRecord>, ops: Op[], audit: AuditEntry[]): VaultWriter {
  const read = <T>(view: BucketView<T>, key: string): T | undefined => {
    for (let i = ops.length - 1; i >= 0; i--) if (ops[i].view === view && ops[i].key === key) return ops[i].value as T | undefined;
    return view.entries.get(key)?.value;
  };
  const change = <T>(view: BucketView<T>, key: string, value: T | undefined) => {
    const first = ops.find((o) => o.view === view && o.key === key);
    ops.push(first ? { ...first, value } : { view: view as BucketView<unknown>, key, value, expected: view.revisionOf(key) });
  };
  const liveKeys = (view: BucketView<unknown>, prefix: string) => {
    const found = new Set([...view.entries.keys()].filter((k) => k.startsWith(prefix)));
    for (const op of ops) if (op.view === view && op.key.startsWith(prefix)) (op.value === undefined ? found.delete(op.key) : found.add(op.key));
    return [...found].sort();
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
  };
}

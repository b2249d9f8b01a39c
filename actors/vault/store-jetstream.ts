import { traced } from '../../bus/trace.js';
import { StorageType, type JetStreamClient, type JetStreamManager } from 'nats';
import { retryWhileStarting } from '../../lib/state/jetstream.js';
import { AUDIT_SCAN_MAX, vaultState, type AuditEntry, type AuditPage, type AuditQuery, type WrittenMark } from '../../bus/subjects.js';
import { JetStreamAudit } from './audit-jetstream.js';
import { BucketView, HISTORY } from './bucket-view.js';
import type { VaultViews } from './buffered-writer.js';
import type { DataKeyRecord, DeletedRecord, SecretRecord, ValueKeyRecord, VaultStore, VaultWriter, VersionRecord } from './store.js';
import { eraseRemoved, scrubSecrets } from './store-jetstream-erase.js';
import { MARKED, WrittenMarks } from './store-jetstream-sync.js';
import { publish, type JetStreamWriteParts } from './store-jetstream-write.js';
import { VersionUsage } from './version-usage.js';

const SEP = '\u0000';

export interface JetStreamVaultOptions {
  replicas: number;
  /** Tells the other replicas where their views must be to show a change just made durable (before it is answered). */
  announce?: (mark: WrittenMark) => void | Promise<void>;
  auditMaxAgeMs: number;
  auditMaxEntries: number;
  onAuditLost?: (count: number) => void;
  /**
   * How many times this replica's bus connection was lost so far (Bus.connectionLosses):
   * announcements sent while it was away never arrive, so after a loss the next read catches up
   * with the streams themselves.
   */
  connectionLosses?: () => number;
  /** A destroyed version whose bytes could not be erased from its stream (they stay until a later destroy or sweep). */
  onEraseFailed?: (err: unknown) => void;
  /** A change of a write that lost could not be put back (write-attempt.ts): the write answers 503. */
  onPutBackFailed?: (err: unknown) => void;
}

/**
 * The vault on JetStream (docs/operations.md "How writes stay correct"): data keys and sealed secrets in key-value
 * buckets with `replicas` copies, audit entries in a stream with retention. Reads come from local
 * views; a write runs `fn` against them, then commits each change as an intent naming the revision
 * it read (quorum-acknowledged), accepted only if the key was still there when the stream ordered
 * it; a conflict (another replica wrote first) runs `fn` again on the view that now shows the
 * winner, so create-if-absent and check-and-set give exactly one winner across hosts.
 * Changes of one write are committed in order (data key, secret, audit entry): a crash between two
 * leaves at most an unused data key, never a secret without its key (store-jetstream-write.ts).
 * Reads wait for the views to show every write answered so far (store-jetstream-sync.ts); what is
 * erased apart from a write is store-jetstream-erase.ts's.
 */
export class JetStreamVaultStore implements VaultStore {
  private readonly keysView: BucketView<DataKeyRecord>;
  private readonly secretsView: BucketView<SecretRecord>;
  private readonly versionsView: BucketView<VersionRecord>;
  private readonly deletedView: BucketView<DeletedRecord>;
  private readonly valueKeysView: BucketView<ValueKeyRecord>;
  /** Where the views must be before a read. */
  private readonly marks: WrittenMarks;
  private readonly writeParts: JetStreamWriteParts;

  private constructor(
    manager: JetStreamManager,
    private readonly views: VaultViews,
    private readonly audit: JetStreamAudit,
    /** Audit entries of a durable change that could not be appended within the retry period. */
    onAuditLost: (count: number) => void,
    announce: ((mark: WrittenMark) => void | Promise<void>) | undefined,
    connectionLosses: () => number,
    onEraseFailed: (err: unknown) => void,
    onPutBackFailed: (err: unknown) => void = () => undefined,
  ) {
    this.keysView = views.keys;
    this.secretsView = views.secrets;
    this.versionsView = views.versions;
    this.deletedView = views.deleted;
    this.valueKeysView = views.valueKeys;
    this.marks = new WrittenMarks(manager, views, announce !== undefined, connectionLosses);
    this.writeParts = { views, marks: this.marks, announce, appendAudit: (entries) => this.appendAudit(entries), onAuditLost, onEraseFailed, onPutBackFailed, store: this };
  }

  /** Where opening the store spent its time (the last attempt): said in the vault's start line. */
  openTimings: { bucketsMs: number; auditMs: number; viewsMs: number } | null = null;

  /** A write made durable by another replica: reads from now on show it (a 0.2 replica's mark names the first two buckets only). */
  heard(mark: WrittenMark): void {
    this.marks.heard(mark);
  }

  static async open(js: JetStreamClient, manager: () => Promise<JetStreamManager>, options: JetStreamVaultOptions): Promise<JetStreamVaultStore> {
    // A cluster still electing its leaders answers "temporarily unavailable" (or nothing) for a while: wait it out.
    return retryWhileStarting(async () => JetStreamVaultStore.openOnce(js, await manager(), options));
  }

  private static async openOnce(js: JetStreamClient, manager: JetStreamManager, options: JetStreamVaultOptions): Promise<JetStreamVaultStore> {
    // A short request timeout: when a stream's leader is lost, a put fails fast and the write is retried.
    const began = Date.now();
    const bucket = (name: string) => js.views.kv(name, { replicas: options.replicas, history: HISTORY, storage: StorageType.File, timeout: 2_000 });
    const [keys, secrets] = await Promise.all([bucket(vaultState.keys), bucket(vaultState.secrets)]);
    // The buckets of 0.3: identities written by an earlier `pier bus init` do not allow them.
    const [versions, deleted, valueKeys] = await Promise.all([bucket(vaultState.versions), bucket(vaultState.deleted), bucket(vaultState.valueKeys)]).catch((err: unknown) => {
      const text = String((err as Error).message ?? err);
      throw Object.assign(new Error(`the vault could not open its buckets ${vaultState.versions}, ${vaultState.deleted} and ${vaultState.valueKeys} (${text}): if its state identity comes from a release before 0.3, write the identities again with \`pier bus init\` and reload nats-server (docs/operations.md "Upgrading")`), { code: (err as { code?: string }).code });
    });
    const bucketsMs = Date.now() - began;
    const audit = new JetStreamAudit(js, manager);
    await audit.ensure(options.replicas, options.auditMaxAgeMs, options.auditMaxEntries);
    const auditMs = Date.now() - began - bucketsMs;
    const usage = new VersionUsage();
    const views: VaultViews = {
      keys: new BucketView<DataKeyRecord>(keys, vaultState.keys, manager, 'vaultDataKey'),
      secrets: new BucketView<SecretRecord>(secrets, vaultState.secrets, manager, 'vaultSecret'),
      versions: new BucketView<VersionRecord>(versions, vaultState.versions, manager, 'vaultVersion', (key, before, after) => usage.changed(key, before, after)),
      deleted: new BucketView<DeletedRecord>(deleted, vaultState.deleted, manager, 'vaultDeleted'),
      valueKeys: new BucketView<ValueKeyRecord>(valueKeys, vaultState.valueKeys, manager, 'vaultValueKey'),
      usage,
    };
    const losses = options.connectionLosses ?? (() => 0);
    const store = new JetStreamVaultStore(manager, views, audit, options.onAuditLost ?? (() => undefined), options.announce, losses, options.onEraseFailed ?? (() => undefined), options.onPutBackFailed);
    // All settled before giving up: a view still starting when another failed would follow on, unowned.
    const failed = (await Promise.allSettled(MARKED.map((k) => store.marks.viewOf(k).start(js)))).find((r) => r.status === 'rejected');
    if (failed) {
      await store.close(); // tried again from scratch: this one stops following
      throw failed.reason;
    }
    store.openTimings = { bucketsMs, auditMs, viewsMs: Date.now() - began - bucketsMs - auditMs };
    return store;
  }

  /** Makes the views show every write answered so far, wherever it was made (store-jetstream-sync.ts). */
  sync(): Promise<void> {
    return this.marks.sync();
  }

  dataKey(scope: string): DataKeyRecord | undefined {
    return this.keysView.entries.get(scope)?.value;
  }

  secret(key: string): SecretRecord | undefined {
    return this.secretsView.entries.get(key)?.value;
  }

  listScope(scope: string): Array<{ key: string; value: SecretRecord }> {
    return sortedEntries(this.secretsView, `${scope}${SEP}`);
  }

  version(vkey: string): VersionRecord | undefined {
    return this.versionsView.entries.get(vkey)?.value;
  }

  deleted(key: string): DeletedRecord | undefined {
    return this.deletedView.entries.get(key)?.value;
  }

  valueKey(id: string): ValueKeyRecord | undefined {
    return this.valueKeysView.entries.get(id)?.value;
  }

  listDeleted(scope?: string): Array<{ key: string; value: DeletedRecord }> {
    return sortedEntries(this.deletedView, scope === undefined ? '' : `${scope}${SEP}`);
  }

  everything() {
    return {
      dataKeys: [...this.keysView.entries].map(([scope, held]) => ({ scope, record: held.value })).sort((a, b) => (a.scope < b.scope ? -1 : 1)),
      secrets: sortedEntries(this.secretsView, ''),
      versions: sortedEntries(this.versionsView, ''),
      deleted: sortedEntries(this.deletedView, ''),
      valueKeys: sortedEntries(this.valueKeysView, '').map(({ key, value }) => ({ id: key, value })),
    };
  }

  scopesOf(user: string, workspace: string): string[] {
    const prefix = `${user}${SEP}${workspace}${SEP}`;
    return [...this.keysView.entries.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  write<T>(fn: (w: VaultWriter) => T): Promise<T> {
    // A span of the request's trace while it is durable on a quorum (docs/operations.md "Tracing").
    return traced('jetstream publish', 'internal', () => publish(this.writeParts, fn), { 'db.system': 'nats-jetstream' });
  }

  /** Value keys kept ahead of the writes that will seal under them (value-key-pool.ts): one write, one wave of commits. */
  reserveValueKeys(keys: ReadonlyArray<{ id: string; record: ValueKeyRecord }>): Promise<void> {
    return this.write((w) => {
      for (const k of keys) w.putValueKey(k.id, k.record);
    });
  }

  appendAudit(entries: AuditEntry[]): Promise<void> {
    return this.audit.append(entries);
  }

  readAudit(q: AuditQuery, scanMax = AUDIT_SCAN_MAX): Promise<AuditPage> {
    return this.audit.read(q, scanMax);
  }

  /** Retention is the stream's own (max age, max entries): nothing to do here. */
  async pruneAudit(): Promise<number> {
    return 0;
  }

  scrub(writtenBefore: number, keys?: readonly string[]): Promise<number> {
    return scrubSecrets(this.secretsView, writtenBefore, keys);
  }

  /** VaultStore.syncWithStreams: the catch-up reads do without announcements. */
  syncWithStreams(): Promise<void> {
    return this.marks.catchUp.run();
  }

  eraseRemoved(under?: string): Promise<number> {
    return eraseRemoved(this.views, under);
  }

  async close(): Promise<void> {
    await Promise.all(MARKED.map((k) => this.marks.viewOf(k).close()));
  }
}

/** A view's entries under `prefix`, sorted by key. */
function sortedEntries<T>(view: BucketView<T>, prefix: string): Array<{ key: string; value: T }> {
  return [...view.entries]
    .filter(([k]) => k.startsWith(prefix))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, held]) => ({ key, value: held.value }));
}

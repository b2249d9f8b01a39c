import { traced } from '../../bus/trace.js';
import { StorageType, type JetStreamClient, type JetStreamManager } from 'nats';
import { PierError } from '../../bus/errors.js';
import { catchUpOrRefuse, retryWhileStarting, SharedCatchUp, withinBudget } from '../../lib/state/jetstream.js';
import { AUDIT_SCAN_MAX, vaultState, type AuditEntry, type AuditPage, type AuditQuery, type WrittenMark } from '../../bus/subjects.js';
import { JetStreamAudit } from './audit-jetstream.js';
import { BucketView, Conflict, HISTORY } from './bucket-view.js';
import { bufferedWriter, type Op, type VaultViews } from './buffered-writer.js';
import type { DataKeyRecord, DeletedRecord, SecretRecord, ValueKeyRecord, VaultStore, VaultWriter, VersionRecord } from './store.js';
import { dropStrayValueKeys, erasingUnusedValueKeys, secretSealedUnder, type StrayValueKey } from './value-key-erasure.js';
import { VersionUsage } from './version-usage.js';

const SEP = '\u0000';

export interface JetStreamVaultOptions {
  replicas: number;
  /** Tells the other replicas where their views must be to show a change just made durable (before it is answered). */
  announce?: (mark: WrittenMark) => void;
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
}

/** The longest a read waits for this replica's views to show the writes it heard of, before a 503. */
const READ_BUDGET_MS = 1_000;

/**
 * The vault on JetStream (docs/operations.md "How writes stay correct"): data keys and sealed secrets in key-value
 * buckets with `replicas` copies, audit entries in a stream with retention. Reads come from local
 * views; a write runs `fn` against them, then commits each change as an intent naming the revision
 * it read (quorum-acknowledged), accepted only if the key was still there when the stream ordered
 * it; a conflict (another replica wrote first) runs `fn` again on the view that now shows the
 * winner, so create-if-absent and check-and-set give exactly one winner across hosts.
 * Changes of one write are committed in order (data key, secret, audit entry): a crash between two
 * leaves at most an unused data key, never a secret without its key.
 */
export class JetStreamVaultStore implements VaultStore {
  private readonly keysView: BucketView<DataKeyRecord>;
  private readonly secretsView: BucketView<SecretRecord>;
  private readonly versionsView: BucketView<VersionRecord>;
  private readonly deletedView: BucketView<DeletedRecord>;
  private readonly valueKeysView: BucketView<ValueKeyRecord>;

  private constructor(
    private readonly manager: JetStreamManager,
    private readonly views: VaultViews,
    private readonly audit: JetStreamAudit,
    /** Audit entries of a durable change that could not be appended within the retry period. */
    private readonly onAuditLost: (count: number) => void,
    private readonly announce: ((mark: WrittenMark) => void) | undefined,
    private readonly connectionLosses: () => number,
    private readonly onEraseFailed: (err: unknown) => void,
  ) {
    this.keysView = views.keys;
    this.secretsView = views.secrets;
    this.versionsView = views.versions;
    this.deletedView = views.deleted;
    this.valueKeysView = views.valueKeys;
  }

  /** Where opening the store spent its time (the last attempt): said in the vault's start line. */
  openTimings: { bucketsMs: number; auditMs: number; viewsMs: number } | null = null;

  /** The connection losses a catch-up with the streams has covered (reads after a newer one catch up first). */
  private caughtUpAfterLosses = 0;

  /** The highest marks heard from writers (this replica's own included): reads wait for the views to reach them. */
  private readonly wanted: Required<WrittenMark> = { keys: 0, secrets: 0, versions: 0, deleted: 0, valueKeys: 0 };

  /** A write made durable by another replica: reads from now on show it (a 0.2 replica's mark names the first two buckets only). */
  heard(mark: WrittenMark): void {
    for (const k of MARKED) this.wanted[k] = Math.max(this.wanted[k], mark[k] ?? 0);
  }

  /** Each bucket's view, by the name its mark goes by. */
  private viewOf(k: (typeof MARKED)[number]): BucketView<unknown> {
    return { keys: this.keysView, secrets: this.secretsView, versions: this.versionsView, deleted: this.deletedView, valueKeys: this.valueKeysView }[k] as BucketView<unknown>;
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
    const store = new JetStreamVaultStore(manager, views, audit, options.onAuditLost ?? (() => undefined), options.announce, losses, options.onEraseFailed ?? (() => undefined));
    store.caughtUpAfterLosses = losses();
    // All settled before giving up: a view still starting when another failed would follow on, unowned.
    const failed = (await Promise.allSettled(MARKED.map((k) => store.viewOf(k).start(js)))).find((r) => r.status === 'rejected');
    if (failed) {
      await store.close(); // tried again from scratch: this one stops following
      throw failed.reason;
    }
    store.openTimings = { bucketsMs, auditMs, viewsMs: Date.now() - began - bucketsMs - auditMs };
    return store;
  }

  /**
   * The views brought to the streams' ends as they are now, or the read refused (503): what reads
   * do without announcements, and after a lost connection (announcements may have been missed).
   */
  private readonly catchUp = new SharedCatchUp(() =>
    catchUpOrRefuse(
      async () => (await Promise.all(MARKED.map((k) => this.manager.streams.info(`KV_${vaultState[k]}`)))).map((i) => i.state.last_seq),
      MARKED.map((k) => this.viewOf(k).applied),
      'the vault streams',
    ),
  );

  /**
   * Makes the views show every write answered so far, wherever it was made. With announcements
   * (`announce`/`heard`: each writer tells every replica its marks before it answers), that is a
   * local check, waiting only when a view is behind a heard mark (at most 1 s, e.g. while its follow
   * re-attaches after a node loss). Without them, one stream-info round trip (concurrent callers share it).
   */
  sync(): Promise<void> {
    if (!this.announce) return this.catchUp.run();
    const losses = this.connectionLosses();
    if (losses !== this.caughtUpAfterLosses) {
      // Away from the bus since the last catch-up: announcements may be lost. The streams say where
      // the views must be (refused, 503, if they cannot get there within the budget).
      return this.catchUp
        .run()
        .then(() => {
          this.caughtUpAfterLosses = Math.max(this.caughtUpAfterLosses, losses);
          return this.sync();
        });
    }
    const lagging = () => MARKED.filter((k) => this.viewOf(k).applied.value < this.wanted[k]);
    if (lagging().length === 0) return Promise.resolve();
    // Waited for within one budget, the marks read again each time the view reaches them: under a
    // stream of writes a newer mark is heard while the view catches up with the last, and refusing
    // then (it did, in an upgrade run) answers 503 to a read the view would serve a moment later.
    const deadline = Date.now() + READ_BUDGET_MS;
    const caughtUp = async (): Promise<void> => {
      for (let behind = lagging(); behind.length > 0 && Date.now() < deadline; behind = lagging()) {
        await withinBudget(Promise.all(behind.map((k) => this.viewOf(k).applied.reached(this.wanted[k]))), deadline - Date.now());
      }
    };
    return caughtUp().then(async () => {
      if (lagging().length === 0) return;
      // Still behind after the budget (its follow re-attaching after a node loss). A mark past the
      // end of its stream was never written (a forged one, or a stream reset): it is forgotten, so
      // it costs one wait, not one per read. A real one is kept, and the read is refused (503)
      // rather than answered from a view that may be missing an acknowledged write.
      for (const k of lagging()) {
        const end = await this.viewOf(k).streamEnd();
        if (end !== null && this.wanted[k] > end) this.wanted[k] = this.viewOf(k).applied.value;
      }
      if (lagging().length > 0) throw new PierError('UNAVAILABLE', 'this vault replica is catching up with a recent change; try again');
    });
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
    return traced('jetstream publish', 'internal', () => this.publish(fn), { 'db.system': 'nats-jetstream' });
  }

  /**
   * `attempt`, and afterwards (whatever it answered) the value keys committed by attempts that did
   * not land: a write commits change by change, so an attempt that lost to another replica's may
   * have committed a new value's key, and its sealed record was written to the stream and refused
   * there. That key names nothing accepted: it is erased (value-key-erasure.ts dropStrayValueKeys),
   * or the refused copy would stay readable after its value (sealed anew by the retry) is destroyed.
   */
  private async publish<T>(fn: (w: VaultWriter) => T): Promise<T> {
    const stray: StrayValueKey[] = [];
    try {
      return await this.attempts(fn, stray);
    } finally {
      if (stray.length > 0) await dropStrayValueKeys(this, stray).catch((err: unknown) => this.onEraseFailed(err));
    }
  }

  private async attempts<T>(fn: (w: VaultWriter) => T, stray: StrayValueKey[]): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const ops: Op[] = [];
      const audit: AuditEntry[] = [];
      const result = erasingUnusedValueKeys(fn)(bufferedWriter(this.views, ops, audit));
      const mark: Required<WrittenMark> = { keys: 0, secrets: 0, versions: 0, deleted: 0, valueKeys: 0 };
      /** Data keys, versions and deleted secrets removed by this write: their earlier entries are erased once it is durable. */
      const erase: Array<{ view: BucketView<unknown>; key: string; seq: number }> = [];
      /** Value keys this attempt committed: stray if it does not land. */
      const keysPut: StrayValueKey[] = [];
      try {
        // Committed in the order `fn` made them: a version is kept before the secret moves past it.
        for (const { view, key, value, expected } of ops) {
          const seq = await view.commit(key, value, expected);
          if (view === this.viewOf('valueKeys') && value !== undefined) keysPut.push({ id: key, secret: secretSealedUnder(ops, key) });
          const k = MARKED.find((name) => this.viewOf(name) === view)!;
          mark[k] = Math.max(mark[k], seq);
          // (A secret's own earlier records go with `scrub`'s margin, or at once under a purge: eraseRemoved.)
          if (value === undefined && seq > 0 && view !== this.viewOf('secrets')) erase.push({ view, key, seq });
          // A kept version written again (sealed anew by a rekey, or imported over): its earlier value leaves the stream.
          else if (value !== undefined && expected > 0 && view === this.viewOf('versions')) erase.push({ view, key, seq });
        }
      } catch (err) {
        stray.push(...keysPut);
        // The stream out of reach (a node lost, a leader being elected): the write may or may not
        // have landed; the caller is told to try again (503), not that Pier broke (500).
        if (!(err instanceof Conflict)) throw err instanceof PierError ? err : new PierError('UNAVAILABLE', 'the vault store did not answer in time; try again', { cause: err });
        if (attempt >= 20) throw new PierError('CONFLICT', 'too many concurrent writes of the same secret; retry');
        // Another replica wrote first: see what it wrote, then decide again.
        continue;
      }
      // The change is durable now: the other replicas hear where to read it from before the client
      // is answered. Its audit entries are durable before the answer too (docs/vault.md "Audit": a
      // change's entry is never lost to a power cut), retried across a leader election of the audit
      // stream; one that still cannot be written is counted and logged, and the write, which
      // happened, is answered as done rather than failed.
      if (ops.length > 0 && this.announce) {
        this.heard(mark);
        this.announce(mark);
      }
      if (audit.length > 0) await this.appendAudit(audit).catch(() => this.onAuditLost(audit.length));
      // Destroyed means unreadable with the master key in hand: the removed entries' bytes leave the stream too
      // (data keys first: a write's changes are in the order it made them, and a purge removes its keys first).
      for (const e of erase) await e.view.eraseBefore(e.key, e.seq).catch((err: unknown) => this.onEraseFailed(err));
      return result;
    }
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

  async scrub(writtenBefore: number, keys?: readonly string[]): Promise<number> {
    const view = this.secretsView;
    let erased = 0;
    for (const key of keys ?? view.keysEverWritten()) {
      const revision = view.revisionOf(key);
      if (revision > 0) erased += await view.eraseBefore(key, revision, writtenBefore);
    }
    return erased;
  }

  /** VaultStore.syncWithStreams: the catch-up reads do without announcements. */
  syncWithStreams(): Promise<void> {
    return this.catchUp.run();
  }

  /**
   * VaultStore.eraseRemoved: the earlier entries of removed keys the views have not seen erased.
   * Under a purged workspace, a secret's too, at once; elsewhere those are `scrub`'s, with its margin.
   */
  async eraseRemoved(under?: string): Promise<number> {
    const buckets = under === undefined ? (['keys', 'versions', 'deleted', 'valueKeys'] as const) : MARKED;
    let erased = 0;
    for (const k of buckets) {
      const view = this.viewOf(k);
      for (const [key, seq] of view.removedUnerased(under)) erased += await view.eraseBefore(key, seq);
    }
    return erased;
  }

  async close(): Promise<void> {
    await Promise.all(MARKED.map((k) => this.viewOf(k).close()));
  }
}

/** The buckets a writer's mark names, in the order they are caught up with. */
const MARKED = ['keys', 'secrets', 'versions', 'deleted', 'valueKeys'] as const;

/** A view's entries under `prefix`, sorted by key. */
function sortedEntries<T>(view: BucketView<T>, prefix: string): Array<{ key: string; value: T }> {
  return [...view.entries]
    .filter(([k]) => k.startsWith(prefix))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, held]) => ({ key, value: held.value }));
}

import { DeliverPolicy, KvWatchInclude, StorageType, type JetStreamClient, type JetStreamManager, type KV, type KvEntry } from 'nats';
import { randomBytes } from 'node:crypto';
import { decode, encode } from '../../bus/codec.js';
import { PierError } from '../../bus/errors.js';
import { ensureStream, retryWhileStarting, SharedCatchUp, withinBudget } from '../../lib/jetstream.js';
import { vaultState, type AuditEntry, type WrittenMark } from '../../bus/subjects.js';
import type { DataKeyRecord, SecretRecord, VaultStore, VaultWriter } from './store.js';

const SEP = '\u0000';

const VAULT_JS = vaultState;

/** KV keys are limited to `[-/_=.a-zA-Z0-9]`: a logical key (with its NUL separators) travels as base64url. */
const kvKey = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
const logicalKey = (k: string) => Buffer.from(k, 'base64url').toString('utf8');

interface Held<T> {
  value: T;
  revision: number;
}

/**
 * What a bucket entry carries: the revision its writer read (`e`), and the value (`v`) or a
 * tombstone (`d`). The server does not decide conflicts (its check-and-set is not serialised on
 * a clustered stream in nats-server 2.9: issue #4320); every view decides them the same way,
 * because every view reads the stream in the same order: an entry counts only if `e` is the
 * revision the key had when it arrives. The first writer wins, the others were never written.
 */
interface Intent<T> {
  e: number;
  v?: T;
  d?: true;
}

/** Audit entries per stream message (at most; ~250 bytes each). */
const AUDIT_BATCH = 256;

/** The entries of one audit message: a batch, or one entry as written before batches. */
function auditEntriesOf(data: Uint8Array): AuditEntry[] {
  try {
    const value = decode<AuditEntry | AuditEntry[]>(data);
    return (Array.isArray(value) ? value : [value]).filter((e) => typeof e === 'object' && e !== null);
  } catch {
    return []; // not ours
  }
}

/** History kept per key: enough for a view starting later to find the last accepted entry behind refused ones. */
const HISTORY = 64;

/**
 * One bucket's local view: every key's last accepted value and revision, kept current by a watch
 * over the whole history, so reads never leave the process and every replica decides the same.
 */
class View<T> {
  readonly entries = new Map<string, Held<T>>();
  /** Revision of the last accepted delete per key: the next write of the key must name it. */
  readonly deleted = new Map<string, number>();
  /** Last stream sequence applied, and writers waiting for theirs. */
  applied = 0;
  private readonly waiters: Array<{ seq: number; wake: () => void }> = [];
  private stop: (() => void) | null = null;
  private closed = false;

  constructor(readonly kv: KV) {}

  /**
   * Watches the whole history, for ever: the watch's ordered consumer re-creates itself when its
   * node goes; if that fails too (an election), the watch ends and a new one is started (entries
   * already applied are skipped by sequence).
   */
  async start(): Promise<void> {
    let ready!: () => void;
    const initialised = new Promise<void>((r) => (ready = r));
    const watch = await this.kv.watch({ include: KvWatchInclude.AllHistory, initializedFn: () => ready() });
    this.stop = () => {
      this.closed = true;
      watch.stop();
    };
    void (async () => {
      for await (const e of watch) this.apply(e);
    })()
      .catch(() => undefined)
      .then(() => {
        if (!this.closed) void this.restart();
      });
    await initialised;
  }

  private async restart(): Promise<void> {
    for (let attempt = 0; !this.closed; attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempt)));
      if (this.closed) return;
      try {
        await this.start();
        return;
      } catch {
        // the bucket's stream is electing: try again
      }
    }
  }

  /** The revision a writer must name for `key`: its last accepted write or delete (0: never written). */
  revisionOf(key: string): number {
    return this.entries.get(key)?.revision ?? this.deleted.get(key) ?? 0;
  }

  apply(e: KvEntry): void {
    if (e.revision <= this.applied) return;
    this.applied = e.revision;
    const key = logicalKey(e.key);
    if (e.operation === 'PUT') {
      let intent: Intent<T>;
      try {
        intent = decode<Intent<T>>(e.value);
      } catch {
        intent = { e: -1 }; // not ours: never accepted
      }
      if (intent.e === this.revisionOf(key)) {
        if (intent.d) {
          this.entries.delete(key);
          this.deleted.set(key, e.revision);
        } else {
          this.entries.set(key, { value: intent.v as T, revision: e.revision });
          this.deleted.delete(key);
        }
      }
    }
    // (Server-side DEL and PURGE markers are never written by Pier: the key's accepted state stays.)
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].seq <= this.applied) this.waiters.splice(i, 1)[0].wake();
    }
  }

  /** Resolves once the view has applied the stream up to `seq` (a write of ours, come back through the watch). */
  reached(seq: number, timeoutMs = 10_000): Promise<void> {
    if (seq <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`jetstream: the view did not reach revision ${seq} in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ seq, wake: () => (clearTimeout(timer), resolve()) });
    });
  }

  close(): void {
    this.closed = true;
    this.stop?.();
  }
}

/** A change buffered by `write(fn)`, committed as an intent naming the revision `fn` read (see `Intent`). */
interface Op {
  view: View<unknown>;
  key: string;
  /** The new value; undefined: a delete. */
  value: unknown;
  /** The key's revision when read: its last accepted write or delete (0: never written). */
  expected: number;
}

class Conflict extends Error {}

export interface JetStreamVaultOptions {
  replicas: number;
  /** Tells the other replicas where their views must be to show a change just made durable (before it is answered). */
  announce?: (mark: WrittenMark) => void;
  auditMaxAgeMs: number;
  auditMaxEntries: number;
  onAuditLost?: (count: number) => void;
}


/**
 * The vault on JetStream (CONTRACT.md section 10): data keys and sealed secrets in key-value
 * buckets with `replicas` copies, audit entries in a stream with retention. Reads come from local
 * views; a write runs `fn` against them, then commits each change as an intent naming the revision
 * it read (quorum-acknowledged), accepted only if the key was still there when the stream ordered
 * it; a conflict (another replica wrote first) runs `fn` again on the view that now shows the
 * winner, so create-if-absent and check-and-set give exactly one winner across hosts.
 * Changes of one write are committed in order (data key, secret, audit entry): a crash between two
 * leaves at most an unused data key, never a secret without its key.
 */
export class JetStreamVaultStore implements VaultStore {
  private constructor(
    private readonly js: JetStreamClient,
    private readonly manager: JetStreamManager,
    private readonly keysView: View<DataKeyRecord>,
    private readonly secretsView: View<SecretRecord>,
    /** Audit entries of a durable change that could not be appended within the retry period. */
    private readonly onAuditLost: (count: number) => void,
    private readonly announce: ((mark: WrittenMark) => void) | undefined,
  ) {}

  /** The highest marks heard from writers (this replica's own included): reads wait for the views to reach them. */
  private readonly wanted: WrittenMark = { keys: 0, secrets: 0 };

  /** A write made durable by another replica: reads from now on show it. */
  heard(mark: WrittenMark): void {
    this.wanted.keys = Math.max(this.wanted.keys, mark.keys);
    this.wanted.secrets = Math.max(this.wanted.secrets, mark.secrets);
  }

  static async open(js: JetStreamClient, manager: () => Promise<JetStreamManager>, options: JetStreamVaultOptions): Promise<JetStreamVaultStore> {
    // A cluster still electing its leaders answers "temporarily unavailable" (or nothing) for a while: wait it out.
    return retryWhileStarting(async () => JetStreamVaultStore.openOnce(js, await manager(), options));
  }

  private static async openOnce(js: JetStreamClient, manager: JetStreamManager, options: JetStreamVaultOptions): Promise<JetStreamVaultStore> {
    // A short request timeout: when a stream's leader is lost, a put fails fast and the write is retried.
    const bucket = (name: string) => js.views.kv(name, { replicas: options.replicas, history: HISTORY, storage: StorageType.File, timeout: 2_000 });
    const [keys, secrets] = await Promise.all([bucket(VAULT_JS.keys), bucket(VAULT_JS.secrets)]);
    // Retention is the operator's to change between starts: the newest replica's settings win.
    await ensureStream(
      manager,
      {
        name: VAULT_JS.auditStream,
        subjects: [VAULT_JS.auditSubject],
        num_replicas: options.replicas,
        max_age: options.auditMaxAgeMs * 1_000_000,
        // Messages are batches of entries: the entry limit bounds both the messages and the bytes
        // (about 250 bytes an entry, so at most about twice the entries LMDB would keep).
        max_msgs: options.auditMaxEntries,
        max_bytes: options.auditMaxEntries * 512,
      },
      'update',
    );
    const store = new JetStreamVaultStore(js, manager, new View<DataKeyRecord>(keys), new View<SecretRecord>(secrets), options.onAuditLost ?? (() => undefined), options.announce);
    await Promise.all([store.keysView.start(), store.secretsView.start()]);
    return store;
  }

  private readonly catchUp = new SharedCatchUp(() =>
    withinBudget(
      (async () => {
        const [keys, secrets] = await Promise.all([this.manager.streams.info(`KV_${VAULT_JS.keys}`), this.manager.streams.info(`KV_${VAULT_JS.secrets}`)]);
        await Promise.all([this.keysView.reached(keys.state.last_seq), this.secretsView.reached(secrets.state.last_seq)]);
      })(),
    ),
  );

  /**
   * Makes the views show every write answered so far, wherever it was made. With announcements
   * (`announce`/`heard`: each writer tells every replica its marks before it answers), that is a
   * local check, waiting only when a view is behind a heard mark (at most 1 s, e.g. while its watch
   * re-attaches after a node loss). Without them, one stream-info round trip (concurrent callers share it).
   */
  sync(): Promise<void> {
    if (!this.announce) return this.catchUp.run();
    const behind = [
      this.keysView.applied < this.wanted.keys ? this.keysView.reached(this.wanted.keys) : null,
      this.secretsView.applied < this.wanted.secrets ? this.secretsView.reached(this.wanted.secrets) : null,
    ].filter((p) => p !== null);
    if (behind.length === 0) return Promise.resolve();
    return withinBudget(Promise.all(behind)).then(() => {
      // A mark still out of reach after the budget (a forged one, or a stream reset) is forgotten:
      // it costs one wait, not one per read.
      this.wanted.keys = Math.min(this.wanted.keys, this.keysView.applied);
      this.wanted.secrets = Math.min(this.wanted.secrets, this.secretsView.applied);
    });
  }

  dataKey(scope: string): DataKeyRecord | undefined {
    return this.keysView.entries.get(scope)?.value;
  }

  secret(key: string): SecretRecord | undefined {
    return this.secretsView.entries.get(key)?.value;
  }

  listScope(scope: string): Array<{ key: string; value: SecretRecord }> {
    const prefix = `${scope}${SEP}`;
    return [...this.secretsView.entries]
      .filter(([k]) => k.startsWith(prefix))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, held]) => ({ key, value: held.value }));
  }

  everything() {
    return {
      dataKeys: [...this.keysView.entries].map(([scope, held]) => ({ scope, record: held.value })).sort((a, b) => (a.scope < b.scope ? -1 : 1)),
      secrets: [...this.secretsView.entries].map(([key, held]) => ({ key, value: held.value })).sort((a, b) => (a.key < b.key ? -1 : 1)),
    };
  }

  scopesOf(user: string, workspace: string): string[] {
    const prefix = `${user}${SEP}${workspace}${SEP}`;
    return [...this.keysView.entries.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  async write<T>(fn: (w: VaultWriter) => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const ops: Op[] = [];
      const audit: AuditEntry[] = [];
      const result = fn(this.writer(ops, audit));
      const mark = { keys: 0, secrets: 0 };
      try {
        for (const op of ops) {
          const seq = await this.commit(op);
          if (op.view === (this.keysView as View<unknown>)) mark.keys = Math.max(mark.keys, seq);
          else mark.secrets = Math.max(mark.secrets, seq);
        }
      } catch (err) {
        if (!(err instanceof Conflict)) throw err;
        if (attempt >= 20) throw new PierError('CONFLICT', 'too many concurrent writes of the same secret; retry');
        // Another replica wrote first: see what it wrote, then decide again.
        continue;
      }
      // The change is durable now: the other replicas hear where to read it from before the client
      // is answered; its audit entries follow (retried across a leader election of the audit stream
      // rather than failing a write that happened).
      if (ops.length > 0 && this.announce) {
        this.heard(mark);
        this.announce(mark);
      }
      void this.appendAudit(audit).catch(() => this.onAuditLost(audit.length));
      return result;
    }
  }

  private writer(ops: Op[], audit: AuditEntry[]): VaultWriter {
    const buffered = <T>(view: View<T>, key: string): { found: boolean; value: T | undefined } => {
      for (let i = ops.length - 1; i >= 0; i--) if (ops[i].view === view && ops[i].key === key) return { found: true, value: ops[i].value as T | undefined };
      return { found: false, value: undefined };
    };
    const read = <T>(view: View<T>, key: string): T | undefined => {
      const b = buffered(view, key);
      return b.found ? b.value : view.entries.get(key)?.value;
    };
    const change = <T>(view: View<T>, key: string, value: T | undefined) => {
      const first = ops.find((o) => o.view === view && o.key === key);
      if (first) {
        ops.push({ ...first, value });
        return;
      }
      ops.push({ view: view as View<unknown>, key, value, expected: view.revisionOf(key) });
    };
    const liveKeys = (view: View<unknown>, prefix: string) => {
      const keys = new Set([...view.entries.keys()].filter((k) => k.startsWith(prefix)));
      for (const op of ops) if (op.view === view && op.key.startsWith(prefix)) (op.value === undefined ? keys.delete(op.key) : keys.add(op.key));
      return [...keys].sort();
    };
    return {
      dataKey: (scope) => read(this.keysView, scope),
      dataKeys: () => [...this.keysView.entries.keys()].map((scope) => ({ scope, record: read(this.keysView, scope)! })).filter((e) => e.record !== undefined),
      putDataKey: (scope, record) => change(this.keysView, scope, record),
      removeDataKey: (scope) => change(this.keysView, scope, undefined),
      secret: (key) => read(this.secretsView, key),
      putSecret: (key, record) => change(this.secretsView, key, record),
      removeSecret: (key) => change(this.secretsView, key, undefined),
      listScope: (scope) => liveKeys(this.secretsView as View<unknown>, `${scope}${SEP}`).map((key) => ({ key, value: read(this.secretsView, key)! })),
      scopesOf: (user, workspace) => liveKeys(this.keysView as View<unknown>, `${user}${SEP}${workspace}${SEP}`),
      appendAudit: (entry) => void audit.push(entry),
    };
  }

  /**
   * One buffered change, written as an intent naming the revision it was read at; accepted when the
   * view, reading the stream in order, finds the key still at that revision (see `Intent`).
   */
  private async commit(op: Op): Promise<number> {
    const { view, key, value, expected } = op;
    if (value === undefined && expected === 0) return 0; // absent before, absent after
    const intent: Intent<unknown> = value === undefined ? { e: expected, d: true } : { e: expected, v: value };
    const seq = await view.kv.put(kvKey(key), encode(intent));
    try {
      await view.reached(seq, 2_000);
    } catch {
      // The watch is being re-established (its node went away): decide from the key's own history,
      // by the same rule every view applies; the view catches up and agrees.
      if (!(await this.wonFromHistory(view, key, expected, seq))) throw new Conflict();
      return seq;
    }
    if (view.revisionOf(key) !== seq) throw new Conflict();
    return seq;
  }

  /**
   * Whether the write at `seq` was the first, after revision `expected`, to name `expected`: walks
   * the key's entries from `expected` with direct message reads (no consumer, so it works while the
   * view's own consumer is being re-established after a node loss).
   */
  private async wonFromHistory(view: View<unknown>, key: string, expected: number, seq: number): Promise<boolean> {
    const stream = `KV_${view.kv === this.keysView.kv ? VAULT_JS.keys : VAULT_JS.secrets}`;
    const subject = `$KV.${view.kv === this.keysView.kv ? VAULT_JS.keys : VAULT_JS.secrets}.${kvKey(key)}`;
    for (let from = expected + 1; from <= seq; ) {
      // `next_by_subj` (the next message on the subject from `seq`) is in the server's API since 2.9 but not in nats.js's types.
      const m = await this.manager.streams.getMessage(stream, { seq: from, next_by_subj: subject } as unknown as { seq: number });
      let named: number;
      try {
        named = decode<Intent<unknown>>(m.data).e;
      } catch {
        named = -1;
      }
      if (named === expected) return m.seq === seq;
      from = m.seq + 1;
    }
    return false;
  }

  /**
   * Appends entries in batches: one stream message per AUDIT_BATCH entries (the vault audits reads
   * in batches every 20 ms), so the audit costs a quorum write per batch, not per read. One id per
   * message: a retry of a publish whose answer was lost is dropped by the stream's duplicate window.
   */
  async appendAudit(entries: AuditEntry[]): Promise<void> {
    const batches: AuditEntry[][] = [];
    for (let i = 0; i < entries.length; i += AUDIT_BATCH) batches.push(entries.slice(i, i + AUDIT_BATCH));
    // Pipelined on one connection: appended in order, one round trip in all.
    await Promise.all(
      batches.map((batch) => {
        const msgID = randomBytes(12).toString('base64url');
        return retryWhileStarting(() => this.js.publish(VAULT_JS.auditSubject, encode(batch), { timeout: 2_000, msgID }));
      }),
    );
  }

  /** Newest first, at most `limit`, optionally one user's: read in windows backwards from the stream's end. */
  async readAudit(limit: number, user?: string): Promise<AuditEntry[]> {
    const info = await this.manager.streams.info(VAULT_JS.auditStream);
    const out: AuditEntry[] = [];
    const first = info.state.first_seq;
    // Read in windows from the end: ordered consumers only read forwards.
    for (let end = info.state.last_seq; end >= first && out.length < limit; ) {
      const start = Math.max(first, end - Math.max(limit, 256) + 1);
      const consumer = await this.js.consumers.get(VAULT_JS.auditStream, { opt_start_seq: start, deliver_policy: DeliverPolicy.StartSequence });
      const batch: AuditEntry[] = [];
      const messages = await consumer.fetch({ max_messages: end - start + 1, expires: 2_000 });
      for await (const m of messages) {
        if (m.seq > end) break;
        batch.push(...auditEntriesOf(m.data));
        if (m.seq === end) break;
      }
      for (const e of batch.reverse()) {
        if (user !== undefined && e.user !== user) continue;
        out.push(e);
        if (out.length >= limit) break;
      }
      end = start - 1;
    }
    return out;
  }

  /** Retention is the stream's own (max age, max entries): nothing to do here. */
  async pruneAudit(): Promise<number> {
    return 0;
  }

  async close(): Promise<void> {
    this.keysView.close();
    this.secretsView.close();
  }
}


import type { JetStreamClient, JetStreamManager, JsMsg } from 'nats';
import { randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import { AppliedSequence } from './applied-sequence.js';
import { catchUpOrRefuse, ensureStream, retryWhileStarting, SharedCatchUp } from './jetstream.js';
import { LogSnapshots, type LogNames } from './log-snapshots.js';
import { StreamFollower } from './stream-follower.js';
import { readRecordIfOurs, RecordFormatError, recordBytes, type RecordKind } from './record-format.js';

export type { LogNames } from './log-snapshots.js';

/**
 * State rebuilt by replaying a log. `apply` must be deterministic and bump `revision` by one;
 * `dump`/`load` carry the whole state in a snapshot.
 */
export interface LogState<C> {
  revision: number;
  apply(changes: C[]): void;
  dump(): unknown;
  load(dump: unknown, revision: number): void;
}

export interface LogOptions<C, S extends LogState<C>> {
  replicas: number;
  fresh: () => S;
  /** A snapshot is taken every this many accepted entries (by the replica whose write reached it). */
  snapshotEvery?: number;
  onError?: (err: unknown, what: string) => void;
  /** The format its entries and snapshots are checked against (lib/state/record-format.ts). */
  recordKind: RecordKind;
}

/**
 * One write as the log carries it: its changes and the revision its writer read (`expected`).
 * Replicas read the log in stream order and accept an entry only if `expected` is the revision
 * they are at: the first writer per revision wins, the others re-run on the new state. The same
 * rule on every replica gives the same revisions everywhere. `origin` names the writing replica.
 * (Why not the server's expected-last-sequence check: docs/operations.md "How writes stay correct".)
 */
interface Entry<C> {
  expected: number;
  changes: C[];
  origin?: string;
}

/** How long a catch-up may take, for each of its two steps (learning where the log ends, reaching it). */
const CATCH_UP_MS = 1_000;

/**
 * A replicated state machine on JetStream (docs/operations.md "How writes stay correct"): writes are entries of a log
 * stream with `replicas` copies; every replica keeps the whole state in memory by replaying it.
 *
 * Compaction: every `snapshotEvery` accepted entries, the replica whose entry reached that revision
 * writes the state as a snapshot (LogSnapshots). A replica opens from the newest snapshot and the
 * log after it; a replica that finds entries missing (stream sequences are contiguous on a log
 * stream, so a gap means a purge passed it) reloads.
 *
 * Writes of one replica go one at a time: concurrent ones would all name the same revision and all
 * but one be refused.
 */
export class ReplicatedLog<C, S extends LogState<C>> {
  state: S;
  private readonly applied: AppliedSequence;
  /** Revision each accepted entry produced, by stream sequence (for the writer waiting on it). */
  private readonly accepted = new Map<number, number>();
  private follower: StreamFollower | null = null;
  /** Bumped by every (re)load and by close: a load that finds it moved on starts no follower. */
  private generation = 0;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();
  private snapshotting: Promise<unknown> = Promise.resolve();
  private readonly snapshots: LogSnapshots;
  private readonly origin = randomBytes(8).toString('base64url');
  /** Snapshots taken and written by this replica, and reloads from one after a gap (for tests and metrics). */
  snapshotsWritten = 0;
  /** An entry in a format this release cannot read: the replica stopped before it (see apply). */
  private unreadable: RecordFormatError | null = null;
  reloads = 0;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: LogNames,
    private readonly options: LogOptions<C, S>,
  ) {
    this.state = options.fresh();
    this.applied = new AppliedSequence(names.stream);
    this.snapshots = new LogSnapshots(js, jsm, names, options.recordKind);
  }

  static async open<C, S extends LogState<C>>(js: JetStreamClient, manager: () => Promise<JetStreamManager>, names: LogNames, options: LogOptions<C, S>): Promise<ReplicatedLog<C, S>> {
    return retryWhileStarting(async () => {
      const jsm = await manager();
      await ensureStream(jsm, { name: names.stream, subjects: [names.subject], num_replicas: options.replicas });
      await ensureStream(jsm, { name: names.snapshotStream, subjects: [`${names.snapshotPrefix}.part`, `${names.snapshotPrefix}.done`], num_replicas: options.replicas });
      const log = new ReplicatedLog(js, jsm, names, options);
      try {
        await log.load();
        const last = (await jsm.streams.info(names.stream)).state.last_seq;
        await log.applied.reached(last, 60_000);
        return log;
      } catch (err) {
        await log.close(); // tried again from scratch: this one stops reading
        throw err;
      }
    });
  }

  /** Loads the newest snapshot (if any), then follows the log after it. */
  private async load(): Promise<void> {
    const generation = ++this.generation;
    void this.follower?.close();
    this.follower = null;
    // Its record and its dump read through lib/state/record-format.ts: a later release's is refused by name.
    const snapshot = await this.snapshots.newest();
    if (generation !== this.generation) return;
    const state = this.options.fresh();
    if (snapshot) state.load(snapshot.dump, snapshot.revision);
    this.state = state;
    this.applied.set(snapshot?.seq ?? 0);
    const follower = await StreamFollower.start(this.js, {
      stream: this.names.stream,
      subject: this.names.subject,
      from: this.applied.value + 1,
      onMessage: (m) => this.onEntry(m, generation),
      onError: this.options.onError,
    });
    if (generation === this.generation) this.follower = follower;
    else void follower.close();
  }

  private onEntry(m: JsMsg, generation: number): void {
    // A follow replaced by a (re)load: the new one reads from wherever its snapshot leaves it.
    if (generation !== this.generation) return;
    if (m.seq > this.applied.value + 1) {
      // A purge passed this replica: what it missed is in the newest snapshot.
      void this.reload();
      return;
    }
    this.apply(m.seq, m.data);
  }

  /** A reload is under way: one at a time (every message after a gap would start one otherwise). */
  private reloading = false;
  private reloadAgain = false;
  private lastReloadAt = 0;

  /**
   * Reloads from the newest snapshot, trying again (every second at most) until it works or the log
   * is closed. Reloads follow each other at most once a second: a snapshot that does not cover the
   * gap either (it should not happen; see LogSnapshots.write) costs a reload a second, not a storm
   * of requests that keeps the replica from ever starting (a chaos run saw one).
   */
  private async reload(): Promise<void> {
    if (this.reloading) {
      // A gap seen during a reload (the new follow's first messages) is not dropped: once more after it.
      this.reloadAgain = true;
      return;
    }
    this.reloading = true;
    this.reloadAgain = false;
    this.reloads++;
    try {
      const wait = this.lastReloadAt + 1_000 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      for (let attempt = 0; !this.closed; attempt++) {
        this.lastReloadAt = Date.now();
        try {
          await this.load();
          return;
        } catch (err) {
          this.options.onError?.(err, 'reloading from a snapshot');
          await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * 2 ** attempt)));
        }
      }
    } finally {
      this.reloading = false;
      if (this.reloadAgain && !this.closed) void this.reload();
    }
  }

  private apply(seq: number, data: Uint8Array): void {
    if (seq <= this.applied.value || this.unreadable) return;
    let entry: Entry<C> | undefined;
    try {
      entry = readRecordIfOurs<Entry<C>>(this.options.recordKind, data, `the ${this.names.stream} log at ${seq}`);
    } catch (err) {
      // Skipping it would make this replica's state differ from a newer one's: it stops here, and
      // says why to every read and write that waits on it (a rollback past a format change, or an
      // old replica beside a new one: docs/operations.md "Upgrading").
      this.unreadable = err as RecordFormatError;
      this.options.onError?.(this.unreadable, 'following the log');
      this.applied.stop(this.unreadable);
      return;
    }
    if (entry === undefined) {
      this.applied.set(seq); // not an entry of ours: never accepted
      return;
    }
    try {
      if (entry.expected === this.state.revision && Array.isArray(entry.changes)) {
        this.state.apply(entry.changes);
        this.accepted.set(seq, this.state.revision);
        if (this.accepted.size > 10_000) this.accepted.delete(this.accepted.keys().next().value!);
        if (entry.origin === this.origin && this.state.revision % (this.options.snapshotEvery ?? 1_000) === 0) this.snapshot(seq);
      }
    } catch {
      // a change its state could not apply: never accepted
    }
    this.applied.set(seq);
  }

  /** Dumps the state now, while it is exactly the one at `seq`; writes it in the background. */
  private snapshot(seq: number): void {
    const bytes = recordBytes(this.options.recordKind, this.state.dump());
    const at = { seq, revision: this.state.revision };
    // One at a time: a replica's snapshots land in the order they were taken.
    this.snapshotting = this.snapshotting
      .then(() => this.snapshots.write(at, bytes))
      .then((wrote) => {
        if (wrote) this.snapshotsWritten++;
      })
      .catch((err) => this.options.onError?.(err, 'writing a snapshot'));
  }

  /** Resolves once this replica has applied the log up to `seq`. */
  reached(seq: number, timeoutMs = 10_000): Promise<void> {
    return this.applied.reached(seq, timeoutMs);
  }

  private readonly catchUp = new SharedCatchUp(() =>
    catchUpOrRefuse(async () => [(await this.jsm.streams.info(this.names.stream)).state.last_seq], [this.applied], `the ${this.names.stream} log`, CATCH_UP_MS),
  );

  /**
   * Catches up with the log as it is now, wherever it was written (concurrent callers share one).
   * What cannot be caught up within the budget (the log's leader being elected, this replica's
   * follow re-attaching after a node loss) is refused (503), never answered from a state that may
   * miss an acknowledged write: a chaos run found an upload replica answering "Invalid offset"
   * with the offset from before a PATCH another replica had acknowledged.
   */
  sync(): Promise<void> {
    return this.catchUp.run();
  }

  /**
   * Runs `decide` on the state this replica has; its changes are appended naming that revision;
   * then waits for the entry to come back through the log: accepted, it is the next revision
   * everywhere; refused (another write took that revision), `decide` runs again on the new state.
   * Resolves with `decide`'s result and the revision written (null: nothing to write).
   */
  write<T>(decide: (state: S) => { result: T; changes: C[] }): Promise<{ result: T; revision: number | null }> {
    const run = this.queue.then(() => this.writeNow(decide));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async writeNow<T>(decide: (state: S) => { result: T; changes: C[] }): Promise<{ result: T; revision: number | null }> {
    // Decide on everything written anywhere so far: fewer refusals, and a read of another replica's write.
    await this.sync();
    for (let attempt = 0; attempt < 50; attempt++) {
      if (this.closed) throw new PierError('UNAVAILABLE', `${this.names.stream}: closing`);
      const expected = this.state.revision;
      const { result, changes } = decide(this.state);
      if (changes.length === 0) return { result, revision: null };
      const ack = await this.js.publish(this.names.subject, recordBytes(this.options.recordKind, { expected, changes, origin: this.origin } satisfies Entry<C>), { timeout: 2_000 });
      await this.reached(ack.seq);
      const revision = this.accepted.get(ack.seq);
      if (revision !== undefined) return { result, revision };
      if (this.state.revision === expected) {
        // Refused, yet no other entry moved the state: this replica reloaded past it (a purge); its fate is unknown here.
        throw new PierError('UNAVAILABLE', `${this.names.stream}: the outcome of a write is unknown (the replica reloaded); read and retry`);
      }
    }
    throw new PierError('CONFLICT', `${this.names.stream}: too many concurrent writes; retry`);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.generation++;
    const follower = this.follower;
    this.follower = null;
    this.applied.releaseAll();
    await follower?.close();
  }
}

import { consumerOpts, type JetStreamClient, type JetStreamManager } from 'nats';
import { randomBytes } from 'node:crypto';
import { decode, encode } from '../bus/codec.js';
import { PierError } from '../bus/errors.js';
import { ensureStream, retryWhileStarting, SharedCatchUp, withinBudget } from './jetstream.js';

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

/** Where a log lives: its stream and subject, and the stream of its snapshots. */
export interface LogNames {
  stream: string;
  subject: string;
  snapshotStream: string;
  /** Snapshot parts go to `<prefix>.part`, the record naming them to `<prefix>.done`. */
  snapshotPrefix: string;
}

export interface LogOptions<C, S extends LogState<C>> {
  replicas: number;
  fresh: () => S;
  /** A snapshot is taken every this many accepted entries (by the replica whose write reached it). */
  snapshotEvery?: number;
  onError?: (err: unknown, what: string) => void;
}

/**
 * One write as the log carries it: its changes and the revision its writer read (`expected`).
 * Replicas read the log in stream order and accept an entry only if `expected` is the revision
 * they are at: the first writer per revision wins, the others re-run on the new state. The same
 * rule on every replica gives the same revisions everywhere. `origin` names the writing replica.
 */
interface Entry<C> {
  expected: number;
  changes: C[];
  origin?: string;
}

/** A snapshot as stored: the log sequence and revision it covers, and the stream sequences of its parts. */
interface SnapshotRecord {
  seq: number;
  revision: number;
  parts: number[];
}

/** At most this many parts to a snapshot (1 GiB of state): a record naming more is not one of ours. */
const MAX_PARTS = 4_096;

function isSnapshotRecord(r: unknown): r is SnapshotRecord {
  const x = r as SnapshotRecord;
  const seq = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;
  return typeof x === 'object' && x !== null && seq(x.seq) && seq(x.revision) && Array.isArray(x.parts) && x.parts.length > 0 && x.parts.length <= MAX_PARTS && x.parts.every(seq);
}

/** Far below NATS's default max payload (1 MiB), whatever the server was given. */
const PART_BYTES = 256 * 1024;
const notFound = (err: unknown) => /no message found|not found|404/i.test(String((err as Error)?.message ?? err));

/**
 * A replicated state machine on JetStream (CONTRACT.md section 10): writes are entries of a log
 * stream with `replicas` copies; every replica keeps the whole state in memory by replaying it.
 *
 * Compaction: every `snapshotEvery` accepted entries, the replica whose entry reached that revision
 * writes the state as a snapshot (in parts, on a stream of its own) and then purges the log below
 * the *previous* snapshot, so a replica less than one interval behind keeps reading the log. A
 * replica opens from the newest snapshot and the log after it; a replica that finds entries missing
 * (stream sequences are contiguous on a log stream, so a gap means a purge passed it) reloads.
 *
 * Writes of one replica go one at a time: concurrent ones would all name the same revision and all
 * but one be refused.
 */
export class ReplicatedLog<C, S extends LogState<C>> {
  state: S;
  private applied = 0;
  /** Revision each accepted entry produced, by stream sequence (for the writer waiting on it). */
  private readonly accepted = new Map<number, number>();
  private readonly waiters: Array<{ seq: number; wake: () => void }> = [];
  private stopReading: (() => void) | null = null;
  private generation = 0;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();
  private snapshots: Promise<unknown> = Promise.resolve();
  private readonly origin = randomBytes(8).toString('base64url');
  /** Snapshots taken and written by this replica, and reloads from one after a gap (for tests and metrics). */
  snapshotsWritten = 0;
  reloads = 0;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: LogNames,
    private readonly options: LogOptions<C, S>,
  ) {
    this.state = options.fresh();
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
        await log.reached(last, 60_000);
        return log;
      } catch (err) {
        await log.close(); // tried again from scratch: this one stops reading
        throw err;
      }
    });
  }

  /** Loads the newest snapshot (if any), then reads the log after it, for ever. */
  private async load(): Promise<void> {
    const generation = ++this.generation;
    this.stopReading?.();
    const snapshot = await this.newestSnapshot();
    const state = this.options.fresh();
    if (snapshot) state.load(snapshot.dump, snapshot.revision);
    this.state = state;
    this.applied = snapshot?.seq ?? 0;
    await this.follow(generation);
  }

  /**
   * Reads the log from the entry after the last applied one, for ever: an ordered consumer that
   * re-creates itself when its node goes (missed heartbeats, 1 s); if that fails too (the stream
   * electing a leader), the subscription ends and a new one is made until one holds.
   */
  private async follow(generation: number): Promise<void> {
    const opts = consumerOpts();
    opts.orderedConsumer();
    opts.idleHeartbeat(1_000);
    if (this.applied > 0) opts.startSequence(this.applied + 1);
    else opts.deliverAll();
    // Named, not looked up: an identity may not list streams.
    opts.bindStream(this.names.stream);
    const sub = await this.js.subscribe(this.names.subject, opts);
    this.stopReading = () => sub.unsubscribe();
    void (async () => {
      for await (const m of sub) {
        if (generation !== this.generation) return;
        if (m.seq > this.applied + 1) {
          // A purge passed this replica: what it missed is in the newest snapshot.
          void this.reload();
          return;
        }
        this.apply(m.seq, m.data);
      }
    })()
      .catch((err) => this.options.onError?.(err, 'reading the log'))
      .then(() => {
        if (generation === this.generation && !this.closed) void this.refollow(generation);
      });
  }

  private async refollow(generation: number): Promise<void> {
    for (let attempt = 0; generation === this.generation && !this.closed; attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempt)));
      if (generation !== this.generation || this.closed) return;
      try {
        await this.follow(generation);
        return;
      } catch (err) {
        this.options.onError?.(err, 'following the log again');
      }
    }
  }

  /** Reloads from the newest snapshot, trying again (every second at most) until it works or the log is closed. */
  private async reload(): Promise<void> {
    this.reloads++;
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        await this.load();
        return;
      } catch (err) {
        this.options.onError?.(err, 'reloading from a snapshot');
        await new Promise((r) => setTimeout(r, Math.min(1_000, 100 * 2 ** attempt)));
      }
    }
  }

  private async newestSnapshot(): Promise<(SnapshotRecord & { dump: unknown }) | null> {
    // Its parts may be purged by a newer snapshot while they are read: then read the newer one.
    for (let attempt = 0; ; attempt++) {
      let record: SnapshotRecord;
      try {
        record = decode<SnapshotRecord>((await this.jsm.streams.getMessage(this.names.snapshotStream, { last_by_subj: `${this.names.snapshotPrefix}.done` })).data);
      } catch (err) {
        if (notFound(err)) return null;
        throw err;
      }
      // Read from the bus like any message: its shape is checked and its size bounded before use.
      if (!isSnapshotRecord(record)) throw new PierError('INTERNAL', `${this.names.snapshotStream}: the newest snapshot record is not one (remove it with nats stream rmm, the one before serves)`);
      try {
        const parts = await Promise.all(record.parts.map((seq) => this.jsm.streams.getMessage(this.names.snapshotStream, { seq }).then((m) => m.data)));
        return { ...record, dump: decode(Buffer.concat(parts)) };
      } catch (err) {
        if (!notFound(err) || attempt >= 5) throw err;
      }
    }
  }

  private apply(seq: number, data: Uint8Array): void {
    if (seq <= this.applied) return;
    this.applied = seq;
    try {
      const entry = decode<Entry<C>>(data);
      if (entry.expected === this.state.revision && Array.isArray(entry.changes)) {
        this.state.apply(entry.changes);
        this.accepted.set(seq, this.state.revision);
        if (this.accepted.size > 10_000) this.accepted.delete(this.accepted.keys().next().value!);
        const every = this.options.snapshotEvery ?? 1_000;
        if (entry.origin === this.origin && this.state.revision % every === 0) {
          // Dumped now, while the state is exactly the one at `seq`; written in the background.
          const bytes = encode(this.state.dump());
          const at = { seq, revision: this.state.revision };
          // One at a time: a replica's snapshots land in the order they were taken.
          this.snapshots = this.snapshots.then(() => this.writeSnapshot(at, bytes)).catch((err) => this.options.onError?.(err, 'writing a snapshot'));
        }
      }
    } catch {
      // not an entry of ours: never accepted
    }
    for (let i = this.waiters.length - 1; i >= 0; i--) if (this.waiters[i].seq <= this.applied) this.waiters.splice(i, 1)[0].wake();
  }

  private async writeSnapshot(at: { seq: number; revision: number }, bytes: Uint8Array): Promise<void> {
    const newest = () =>
      this.jsm.streams
        .getMessage(this.names.snapshotStream, { last_by_subj: `${this.names.snapshotPrefix}.done` })
        .then((m) => decode<SnapshotRecord>(m.data))
        .catch((err) => {
          if (notFound(err)) return null;
          throw err;
        });
    const previous = await newest();
    if (previous && previous.seq >= at.seq) return; // a newer one is there already
    if (bytes.byteLength > MAX_PARTS * PART_BYTES) throw new Error(`${this.names.stream}: the state (${bytes.byteLength} bytes) is past the largest snapshot; the log is not compacted`);
    const parts: number[] = [];
    for (let from = 0; from < bytes.byteLength || parts.length === 0; from += PART_BYTES) {
      parts.push((await this.js.publish(`${this.names.snapshotPrefix}.part`, bytes.subarray(from, from + PART_BYTES), { timeout: 5_000 })).seq);
    }
    // Another replica's snapshot covering more may have landed meanwhile: the newest record must stay the newest state.
    const latest = await newest();
    if (latest && latest.seq >= at.seq) return;
    await this.js.publish(`${this.names.snapshotPrefix}.done`, encode({ ...at, parts } satisfies SnapshotRecord), { timeout: 5_000 });
    if (previous) {
      // The log below the previous snapshot is needed by nobody: a replica that far behind reloads.
      // Snapshots older than the previous go too; the previous stays for a replica reading it now.
      await this.purgeBelow(this.names.stream, previous.seq + 1);
      await this.purgeBelow(this.names.snapshotStream, Math.min(...previous.parts));
    }
    this.snapshotsWritten++;
  }

  /** Removes a stream's messages below `seq`. (nats-server 2.9 takes a purge "below 1" as "everything".) */
  private async purgeBelow(stream: string, seq: number): Promise<void> {
    if (seq > 1) await this.jsm.streams.purge(stream, { seq });
  }

  /** Resolves once this replica has applied the log up to `seq`. */
  reached(seq: number, timeoutMs = 10_000): Promise<void> {
    if (seq <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = { seq, wake: () => (clearTimeout(timer), resolve()) };
      const timer = setTimeout(() => {
        // Given up on: out of the list, so a log that stays stuck does not collect one per request.
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        reject(new PierError('UNAVAILABLE', `${this.names.stream}: the log did not reach ${seq} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  private readonly catchUp = new SharedCatchUp(() => withinBudget(this.jsm.streams.info(this.names.stream).then((info) => this.reached(info.state.last_seq))));

  /** Catches up with the log as it is now, wherever it was written (best effort within 1 s; concurrent callers share one). */
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
      const ack = await this.js.publish(this.names.subject, encode({ expected, changes, origin: this.origin } satisfies Entry<C>), { timeout: 2_000 });
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
    this.stopReading?.();
    for (const w of this.waiters.splice(0)) w.wake();
  }
}

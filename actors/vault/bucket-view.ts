import type { JetStreamClient, JetStreamManager, JsMsg, KV } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { AppliedSequence } from '../../lib/applied-sequence.js';
import { StreamFollower } from '../../lib/stream-follower.js';

/** KV keys are limited to `[-/_=.a-zA-Z0-9]`: a logical key (with its NUL separators) travels as base64url. */
const kvKey = (key: string) => Buffer.from(key, 'utf8').toString('base64url');
const logicalKey = (k: string) => Buffer.from(k, 'base64url').toString('utf8');

/** History kept per key: enough for a view starting later to find the last accepted entry behind refused ones. */
export const HISTORY = 64;

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
 * (Why per key, beside the registry's log deciding per whole state: docs/operations.md.)
 */
interface Intent<T> {
  e: number;
  v?: T;
  d?: true;
}

/** Another replica wrote the key first: the caller reads the view again and decides again. */
export class Conflict extends Error {}

/**
 * One bucket's local view: every key's last accepted value and revision, kept current by following
 * the bucket's stream (its whole history), so reads never leave the process and every replica
 * decides the same. It also commits: a change is written as an intent and is the view's to accept.
 */
export class BucketView<T> {
  readonly entries = new Map<string, Held<T>>();
  /** Revision of the last accepted delete per key: the next write of the key must name it. */
  private readonly deleted = new Map<string, number>();
  /** Last stream sequence applied, and writers waiting for theirs. */
  readonly applied: AppliedSequence;
  private follower: StreamFollower | null = null;
  private readonly stream: string;
  private readonly prefix: string;

  constructor(
    readonly kv: KV,
    bucket: string,
    private readonly manager: JetStreamManager,
  ) {
    this.stream = `KV_${bucket}`;
    this.prefix = `$KV.${bucket}.`;
    this.applied = new AppliedSequence(`the view of ${bucket}`);
  }

  /** Follows the whole history, for ever; resolves once the view shows the bucket as it is now. */
  async start(js: JetStreamClient): Promise<void> {
    this.follower = await StreamFollower.start(js, { stream: this.stream, subject: `${this.prefix}>`, from: 1, onMessage: (m) => this.apply(m) });
    const info = await this.manager.streams.info(this.stream);
    if (info.state.messages > 0) await this.applied.reached(info.state.last_seq, 60_000);
  }

  /** The revision a writer must name for `key`: its last accepted write or delete (0: never written). */
  revisionOf(key: string): number {
    return this.entries.get(key)?.revision ?? this.deleted.get(key) ?? 0;
  }

  private apply(m: JsMsg): void {
    if (m.seq <= this.applied.value) return;
    // Server-side DEL and PURGE markers (a KV-Operation header) are never written by Pier: the key's accepted state stays.
    if (!m.headers?.get('KV-Operation')) {
      const key = logicalKey(m.subject.slice(this.prefix.length));
      let intent: Intent<T>;
      try {
        intent = decode<Intent<T>>(m.data);
      } catch {
        intent = { e: -1 }; // not ours: never accepted
      }
      if (intent.e === this.revisionOf(key)) {
        if (intent.d) {
          this.entries.delete(key);
          this.deleted.set(key, m.seq);
        } else {
          this.entries.set(key, { value: intent.v as T, revision: m.seq });
          this.deleted.delete(key);
        }
      }
    }
    this.applied.set(m.seq);
  }

  /**
   * Writes `value` (undefined: a delete) for `key` as an intent naming `expected`, the revision it
   * was read at; answers its stream sequence once the view, reading the stream in order, accepted
   * it, or throws Conflict when another write took that revision first.
   */
  async commit(key: string, value: T | undefined, expected: number): Promise<number> {
    if (value === undefined && expected === 0) return 0; // absent before, absent after
    const intent: Intent<T> = value === undefined ? { e: expected, d: true } : { e: expected, v: value };
    const seq = await this.kv.put(kvKey(key), encode(intent));
    try {
      await this.applied.reached(seq, 2_000);
    } catch {
      // The follow is being re-established (its node went away): decide from the key's own history,
      // by the same rule every view applies; the view catches up and agrees.
      if (!(await this.wonFromHistory(key, expected, seq))) throw new Conflict();
      return seq;
    }
    if (this.revisionOf(key) !== seq) throw new Conflict();
    return seq;
  }

  /**
   * Whether the write at `seq` was the first, after revision `expected`, to name `expected`: walks
   * the key's entries from `expected` with direct message reads (no consumer, so it works while the
   * view's own consumer is being re-established after a node loss).
   */
  private async wonFromHistory(key: string, expected: number, seq: number): Promise<boolean> {
    const subject = `${this.prefix}${kvKey(key)}`;
    for (let from = expected + 1; from <= seq; ) {
      // `next_by_subj` (the next message on the subject from `seq`) is in the server's API since 2.9 but not in nats.js's types.
      const m = await this.manager.streams.getMessage(this.stream, { seq: from, next_by_subj: subject } as unknown as { seq: number });
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

  close(): Promise<void> {
    return this.follower?.close() ?? Promise.resolve();
  }
}

import type { JetStreamClient, JetStreamManager, JsMsg, KV } from 'nats';
import { jsNoMessage } from '../../lib/state/jetstream.js';
import { AppliedSequence } from '../../lib/state/applied-sequence.js';
import { StreamFollower } from '../../lib/state/stream-follower.js';
import { neededReader, readRecordIfOurs, RecordFormatError, recordBytes, RECORD_FORMATS, type RecordKind } from '../../lib/state/record-format.js';

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

/** An entry's intent; one that is not Pier's is never accepted; one of a later format (bucketEntry) throws its refusal. */
const intentOf = <T>(data: Uint8Array, where: string): Intent<T> => readRecordIfOurs<Intent<T> | null>('bucketEntry', data, where) ?? { e: -1 };

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
  /**
   * Keys removed (at this sequence) whose earlier entries this view read and has not seen erased:
   * what `eraseBefore` still has to take (a purge or a destroy cut short before its erasures).
   * Erasures made by another replica are not seen here: this replica's next sweep finds nothing
   * left of such a key and lets go of it (one request each).
   */
  private readonly unerased = new Map<string, number>();
  /** Last stream sequence applied, and writers waiting for theirs. */
  readonly applied: AppliedSequence;
  private follower: StreamFollower | null = null;
  /** What the stream held at the start, read whole before any is judged (`start`). */
  private loading: { until: number; held: JsMsg[] } | null = null;
  /** Why the view stopped (an entry of a later format): it applies nothing after it. */
  private unreadable: Error | null = null;
  private readonly stream: string;
  private readonly prefix: string;

  constructor(
    readonly kv: KV,
    bucket: string,
    private readonly manager: JetStreamManager,
    /** What its values are, for the format check of each (lib/state/record-format.ts). */
    private readonly kind: RecordKind,
    /** Told of every accepted change of a key's value (an index kept beside the view). */
    private readonly onChange?: (key: string, before: T | undefined, after: T | undefined) => void,
  ) {
    this.stream = `KV_${bucket}`;
    this.prefix = `$KV.${bucket}.`;
    this.applied = new AppliedSequence(`the view of ${bucket}`);
  }

  /**
   * Follows the history, for ever; resolves once the view shows the bucket as it is now. What the
   * stream held at the start is read whole before any of it is judged (`load`): the bucket keeps
   * only the last HISTORY entries of each key, so a key written more often than that starts with
   * entries naming revisions that are gone.
   */
  async start(js: JetStreamClient): Promise<void> {
    const info = await this.manager.streams.info(this.stream);
    this.loading = info.state.messages > 0 ? { until: info.state.last_seq, held: [] } : null;
    this.follower = await StreamFollower.start(js, { stream: this.stream, subject: `${this.prefix}>`, from: 1, onMessage: (m) => this.receive(m) });
    if (this.loading) await this.applied.reached(info.state.last_seq, 60_000);
  }

  private receive(m: JsMsg): void {
    if (!this.loading) return this.apply(m);
    const last = this.loading.held.at(-1);
    if (m.seq <= this.applied.value || (last && m.seq <= last.seq)) return; // a re-delivery after the follow restarted
    this.loading.held.push(m);
    if (m.seq < this.loading.until) return;
    const held = this.loading.held;
    this.loading = null;
    this.anchor(held);
    for (const h of held) this.apply(h);
  }

  /**
   * Where each key's judging starts when its oldest entries are gone. Every revision an entry can
   * name is an accepted entry's sequence; the revision current when the retained entries begin is
   * the newest accepted entry before them, and no retained entry can name a gone revision newer
   * than it. The first accepted retained entry names exactly it. So the key's revision before its
   * retained entries is the highest gone revision any of them names (0 for a key whose history is
   * whole: its first entry names 0). If every retained entry of a key was refused, its value (at
   * that revision) is gone with its entry: the key reads as absent (HISTORY makes this need 64
   * refused writes in a row).
   */
  private anchor(held: readonly JsMsg[]): void {
    const first = new Map<string, number>();
    const named = new Map<string, number>();
    for (const m of held) {
      if (m.headers?.get('KV-Operation')) continue;
      const key = logicalKey(m.subject.slice(this.prefix.length));
      const e = this.namedBy(m);
      if (!first.has(key)) first.set(key, m.seq);
      if (e >= 0 && e < first.get(key)!) named.set(key, Math.max(named.get(key) ?? 0, e));
    }
    for (const [key, revision] of named) if (revision > 0) this.deleted.set(key, revision);
  }

  /** The stream's last sequence, or null when it cannot be asked now. */
  async streamEnd(): Promise<number | null> {
    try {
      return (await this.manager.streams.info(this.stream)).state.last_seq;
    } catch {
      return null;
    }
  }

  /** Every key with an accepted write or delete: live and deleted ones. */
  keysEverWritten(): string[] {
    return [...new Set([...this.entries.keys(), ...this.deleted.keys()])];
  }

  /** Removed keys (with their removal's sequence) whose earlier entries may still be in the stream, those under `prefix` only. */
  removedUnerased(prefix = ''): Array<[string, number]> {
    return [...this.unerased].filter(([key]) => key.startsWith(prefix));
  }

  /** The revision a writer must name for `key`: its last accepted write or delete (0: never written). */
  revisionOf(key: string): number {
    return this.entries.get(key)?.revision ?? this.deleted.get(key) ?? 0;
  }

  /**
   * A key's accepted value. One in a format this release cannot read still takes its revision (every
   * replica judges the next write of the key the same), but reading its value throws the refusal,
   * by name: the read or write that meets it answers why, whichever of the view's readers it is.
   */
  private held(value: T, revision: number): Held<T> {
    if (neededReader(value) <= RECORD_FORMATS[this.kind]) return { value, revision };
    const refusal = new RecordFormatError(this.kind, neededReader(value), `${this.stream} at ${revision}`);
    return Object.defineProperty({ revision } as Held<T>, 'value', {
      get: () => {
        throw refusal;
      },
      enumerable: true,
    });
  }

  /** The revision an entry names (-1: none; one of a later format names nothing here, `apply` stops the view at it). */
  private namedBy(m: JsMsg): number {
    try {
      return intentOf<T>(m.data, `${this.stream} at ${m.seq}`).e;
    } catch {
      return -1;
    }
  }

  private apply(m: JsMsg): void {
    if (m.seq <= this.applied.value || this.unreadable) return;
    // Server-side DEL and PURGE markers (a KV-Operation header) are never written by Pier: the key's accepted state stays.
    if (!m.headers?.get('KV-Operation')) {
      const key = logicalKey(m.subject.slice(this.prefix.length));
      let intent: Intent<T>;
      try {
        intent = intentOf<T>(m.data, `${this.stream} at ${m.seq}`);
      } catch (err) {
        // Of a later format: judged past, this view could differ from a newer one's. It stops, and
        // says why to every read and write waiting on it (as a log does: lib/state/replicated-log.ts).
        this.applied.stop((this.unreadable = err as Error));
        return;
      }
      if (intent.e === this.revisionOf(key)) {
        const before = this.entries.get(key);
        if (intent.d) {
          this.entries.delete(key);
          this.deleted.set(key, m.seq);
          // The value it removes came from an entry of the stream, which may still be there (a
          // view started after a key's history was erased begins at the removal: nothing to mark).
          if (before) this.unerased.set(key, m.seq);
        } else {
          this.entries.set(key, this.held(intent.v as T, m.seq));
          this.deleted.delete(key);
        }
        if (this.onChange) this.told(key, before, intent.d ? undefined : (intent.v as T));
      }
    }
    this.applied.set(m.seq);
  }

  /** An index's bug (or a value in a format it cannot read) never stops the view. */
  private told(key: string, before: Held<T> | undefined, after: T | undefined): void {
    try {
      this.onChange!(key, before?.value, after);
    } catch {
      // The value of `before` is one this release cannot read: the index skips it, the view goes on.
    }
  }

  /**
   * Erases from the stream every entry of `key` before `seq` (a delete of it just accepted):
   * each message is overwritten on disk by the server (a secure delete), not only left out of
   * the stream. What a destroyed vault version needs (docs/vault.md "Versions"). The entries gone
   * are a prefix of the key's history, which a view starting later judges from (`anchor`).
   * With `writtenBefore` (ms), only entries written before it go. Answers how many were erased.
   */
  async eraseBefore(key: string, seq: number, writtenBefore = Number.POSITIVE_INFINITY): Promise<number> {
    const subject = `${this.prefix}${kvKey(key)}`;
    let erased = 0;
    for (let from = 1; from < seq; ) {
      let m;
      try {
        m = await this.manager.streams.getMessage(this.stream, { seq: from, next_by_subj: subject } as unknown as { seq: number });
      } catch (err) {
        if (jsNoMessage(err)) break;
        throw err;
      }
      if (m.seq >= seq) break;
      // Entries newer than `writtenBefore` stay (a writer may still be reading them: `wonFromHistory`), and so does everything after them.
      if (m.time.getTime() >= writtenBefore) return erased;
      try {
        await this.manager.streams.deleteMessage(this.stream, m.seq, true);
      } catch (err) {
        // Erased meanwhile by another replica (a destroy retried, the expiry sweep): nothing left to do for it.
        if (!jsNoMessage(err)) throw err;
      }
      erased++;
      from = m.seq + 1;
    }
    // Nothing of the key is left before `seq`: a removal at or before it has nothing more to erase.
    const removedAt = this.unerased.get(key);
    if (removedAt !== undefined && removedAt <= seq) this.unerased.delete(key);
    return erased;
  }

  /**
   * Writes `value` (undefined: a delete) for `key` as an intent naming `expected`, the revision it
   * was read at; answers its stream sequence once the view, reading the stream in order, accepted
   * it, or throws Conflict when another write took that revision first.
   */
  async commit(key: string, value: T | undefined, expected: number): Promise<number> {
    if (value === undefined && expected === 0) return 0; // absent before, absent after
    const intent: Intent<T> = value === undefined ? { e: expected, d: true } : { e: expected, v: value };
    const seq = await this.kv.put(kvKey(key), recordBytes('bucketEntry', intent));
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
      // An entry of a later format is refused by name here: whether this write won cannot be told past it.
      const named = intentOf<unknown>(m.data, `${this.stream} at ${m.seq}`).e;
      if (named === expected) return m.seq === seq;
      // An entry naming a revision after `expected` read one accepted after it, before ours: the
      // key had moved on when ours arrived. (Also what tells it when the first winner's own entry
      // is no longer in the stream: docs/vault.md "Versions", erased history.)
      if (named > expected) return false;
      from = m.seq + 1;
    }
    return false;
  }

  close(): Promise<void> {
    return this.follower?.close() ?? Promise.resolve();
  }
}

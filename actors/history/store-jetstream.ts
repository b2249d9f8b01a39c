import { DiscardPolicy, headers as natsHeaders, type JetStreamClient, type JetStreamManager, type StoredMsg } from 'nats';
import { jsError, jsNoMessage, retryWhileStarting } from '../../lib/state/jetstream.js';
import { readable } from '../../lib/state/record-format.js';
import { ENV } from '../../lib/config/config-env.js';
import { PierError } from '../../bus/errors.js';
import { HISTORY_STREAM, HISTORY_SUBJECTS, historySubjects } from '../../bus/subjects.js';
import type { HistorySeal } from './seal.js';
import { currentEpoch, settleEpoch } from './stream-epoch.js';
import { chainKey, epochOf, sealBound, type HistoryBounds, type HistoryChain, type HistoryHead, type HistoryStore, type Kept, type KeptEntry } from './store.js';

const subjectOf = (chain: HistoryChain) => historySubjects.chain(chainKey(chain));

const H_PREV = 'Pier-Prev';
const H_BYTES = 'Pier-Bytes';
const H_HOLE = 'Pier-Hole';
/** The record format slot (lib/state/record-format.ts): absent, 1. */
const H_OLDEST_READER = 'Pier-Oldest-Reader';
/** Appends racing on one chain (several edges, several app replicas) try again this often at most. */
const MAX_RACES = 32;
/** Sends waiting to be kept on one chain from one edge: past it, 503 (the app retries). */
const MAX_QUEUED = 10_000;
/** Chains whose last offset this edge remembers (its own appends): past it the oldest are forgotten. */
const MAX_REMEMBERED = 10_000;
/** How often an edge reads the stream's epoch again: two edges that wrote one at once agree within it. */
const EPOCH_READ_MS = 10_000;

export interface JetStreamHistoryOptions {
  replicas: number;
  ceilings: HistoryBounds;
  storeBytes: number;
  /** Largest message kept (the stream refuses larger ones). */
  messageBytes: number;
}

/**
 * The history of the cluster shape: one stream, a subject per chain. Order across edges comes from
 * the stream: an append names the offset it follows (`Nats-Expected-Last-Subject-Sequence`), so two
 * racing appends to one chain cannot both follow the same message; the loser reads the chain's new
 * last and tries again. The stream bounds what it keeps by age (the ceiling's), per subject by count
 * (the ceiling's) and in total by bytes; an app's lower bounds are applied when a replay is read.
 * (Purging a subject down to an app's count was tried; a chaos run with it saw the stream hand out
 * one sequence twice after node restarts on nats-server 2.9.10. That the purge caused it is not
 * proven, but a bound on what is read needs no purge, so none is done.)
 */
export class JetStreamHistory implements HistoryStore {
  readonly kind = 'jetstream' as const;
  /** The last offset of chains this edge appended to: usually right, so an append is one round trip. */
  private readonly lastOf = new Map<string, number>();
  /** Appends waiting per chain on this edge (bounded: MAX_QUEUED each; a chain without any has no entry). */
  private readonly queues = new Map<string, { tail: Promise<unknown>; waiting: number }>();
  private readonly epochReader: NodeJS.Timeout;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly seal: HistorySeal,
    /** The stream's epoch (stream-epoch.ts): the same on every edge. */
    private epoch: string,
  ) {
    // Only a stream of 0.2 upgraded by two edges at once can have had two epochs written: the last stands.
    this.epochReader = setInterval(() => {
      void currentEpoch(this.jsm, HISTORY_STREAM).then((e) => {
        if (e) this.epoch = e;
      });
    }, EPOCH_READ_MS);
    this.epochReader.unref();
  }

  static async open(js: JetStreamClient, jsm: JetStreamManager, seal: HistorySeal, options: JetStreamHistoryOptions): Promise<JetStreamHistory> {
    const config = {
      name: HISTORY_STREAM,
      subjects: [HISTORY_SUBJECTS],
      num_replicas: options.replicas,
      max_age: options.ceilings.ttlMs * 1_000_000,
      max_msgs_per_subject: options.ceilings.messages,
      max_bytes: options.storeBytes,
      max_msg_size: options.messageBytes + 1024,
      discard: DiscardPolicy.Old,
      duplicate_window: 1_000_000_000,
    };
    // The epoch the stream carries names it: a stream made again (its history lost) is a new epoch.
    const epoch = await retryWhileStarting(() => settleEpoch(jsm, config, ENV.wsHistoryStoreBytes));
    return new JetStreamHistory(js, jsm, seal, epoch);
  }

  private async lastSeq(subject: string): Promise<number> {
    try {
      return (await this.jsm.streams.getMessage(HISTORY_STREAM, { last_by_subj: subject })).seq;
    } catch (err) {
      if (jsNoMessage(err)) return 0;
      throw unreachable(err);
    }
  }

  async head(chain: HistoryChain): Promise<HistoryHead> {
    return { epoch: epochOf(this.epoch, chain), last: await this.lastSeq(subjectOf(chain)) };
  }

  /**
   * Appends to one chain go one at a time from this edge (each waits for the one before): racing
   * only with other edges', an append needs a retry or two, not one per send in flight here.
   */
  append(chain: HistoryChain, text: string | null, bytes: number, bounds: HistoryBounds): Promise<Kept> {
    const subject = subjectOf(chain);
    const queue = this.queues.get(subject) ?? { tail: Promise.resolve(), waiting: 0 };
    if (queue.waiting >= MAX_QUEUED) return Promise.reject(new PierError('UNAVAILABLE', 'gateway history: too many sends waiting to be kept for this user; try again'));
    queue.waiting++;
    this.queues.set(subject, queue);
    const run = queue.tail.then(() => this.appendNow(subject, chain, text, bytes, bounds));
    queue.tail = run
      .catch(() => undefined)
      .finally(() => {
        queue.waiting--;
        if (queue.waiting === 0 && this.queues.get(subject) === queue) this.queues.delete(subject);
      });
    return run;
  }

  private async appendNow(subject: string, chain: HistoryChain, text: string | null, bytes: number, bounds: HistoryBounds): Promise<Kept> {
    for (let race = 0; race < MAX_RACES; race++) {
      // Another edge won the last place: a moment's pause, growing, so two edges do not meet again at once.
      if (race > 0) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** race)));
      const prev = this.lastOf.get(subject) ?? (await this.lastSeq(subject));
      const h = natsHeaders();
      h.set(H_PREV, String(prev));
      h.set(H_BYTES, String(bytes));
      if (text === null) h.set(H_HOLE, '1');
      const body = text === null ? new Uint8Array(0) : this.seal.seal(text, sealBound(chain, prev));
      try {
        const ack = await this.js.publish(subject, body, { headers: h, timeout: 5_000, expect: { lastSubjectSequence: prev } });
        this.remember(subject, ack.seq);
        // What edges order live messages by is the message really before this one in the stream, read
        // back: nats-server before 2.9.21 does not serialise the expected-sequence check on a clustered
        // stream (issue #4320), so two edges may both have been accepted after `prev` (a fork).
        const before = await this.predecessorOf(subject, prev, ack.seq).catch(() => prev);
        return { epoch: epochOf(this.epoch, chain), seq: ack.seq, prev: before };
      } catch (err) {
        this.lastOf.delete(subject);
        if (jsError(err) === 'wrong-last-sequence') continue; // another append came first
        throw unreachable(err);
      }
    }
    throw new PierError('UNAVAILABLE', 'gateway history: too many sends racing on one user; try again');
  }

  /** The last message of the subject before `seq`, from `prev` on (bounded: a fork is a message or two). */
  private async predecessorOf(subject: string, prev: number, seq: number): Promise<number> {
    let before = prev;
    for (let step = 0; step < 64; step++) {
      // `next_by_subj` (the next message on the subject from `seq`) is in the server's API since 2.9 but not in nats.js's types.
      const m = await this.jsm.streams.getMessage(HISTORY_STREAM, { seq: before + 1, next_by_subj: subject } as unknown as { seq: number });
      if (m.seq >= seq) return before;
      before = m.seq;
    }
    return before;
  }

  async at(chain: HistoryChain, seq: number): Promise<{ at: number } | null> {
    try {
      const m = await this.jsm.streams.getMessage(HISTORY_STREAM, { seq });
      return m.subject === subjectOf(chain) ? { at: m.time.getTime() } : null;
    } catch (err) {
      if (jsNoMessage(err)) return null;
      throw unreachable(err);
    }
  }

  private remember(subject: string, seq: number): void {
    this.lastOf.delete(subject);
    this.lastOf.set(subject, seq);
    if (this.lastOf.size > MAX_REMEMBERED) this.lastOf.delete(this.lastOf.keys().next().value!);
  }

  async after(chain: HistoryChain, after: number, limit: number, maxBytes = Infinity): Promise<KeptEntry[]> {
    const subject = subjectOf(chain);
    const out: KeptEntry[] = [];
    let read = 0;
    for (let from = after + 1; out.length < limit; ) {
      let m: StoredMsg;
      try {
        // `next_by_subj` (the next message on the subject from `seq`) is in the server's API since 2.9 but not in nats.js's types.
        m = await this.jsm.streams.getMessage(HISTORY_STREAM, { seq: from, next_by_subj: subject } as unknown as { seq: number });
      } catch (err) {
        if (jsNoMessage(err)) break;
        throw unreachable(err);
      }
      // Past the bytes asked for: not opened (one request more than the bound, no decryption).
      read += Number(m.header.get(H_BYTES)) || m.data.length;
      if (read > maxBytes) {
        out.push({ ...this.entry(chain, m, false) });
        break;
      }
      out.push(this.entry(chain, m));
      from = m.seq + 1;
    }
    return out;
  }

  private entry(chain: HistoryChain, m: StoredMsg, open = true): KeptEntry {
    const h = m.header;
    readable('gatewayHistory', { oldestReader: h.has(H_OLDEST_READER) ? Number(h.get(H_OLDEST_READER)) : undefined }, `the ${HISTORY_STREAM} stream`);
    const prev = Number(h.get(H_PREV));
    const hole = h.get(H_HOLE) === '1';
    return {
      seq: m.seq,
      prev: Number.isInteger(prev) ? prev : -1,
      at: m.time.getTime(),
      bytes: Number(h.get(H_BYTES)) || m.data.length,
      // A box that does not open (another history key, damage) is a hole: nobody recovers across it.
      text: hole || !open ? null : this.seal.open(m.data, sealBound(chain, prev)),
    };
  }

  async drop(user: string, app: string): Promise<void> {
    await this.jsm.streams.purge(HISTORY_STREAM, { filter: historySubjects.appInstance(user, app) }).catch(() => undefined);
    for (const s of this.lastOf.keys()) if (s.startsWith(historySubjects.appInstancePrefix(user, app))) this.lastOf.delete(s);
  }

  async close(): Promise<void> {
    clearInterval(this.epochReader);
  }
}

function unreachable(err: unknown): PierError {
  if (err instanceof PierError) return err;
  return new PierError('UNAVAILABLE', `gateway history is not reachable now (${String((err as Error).message).slice(0, 120)}); try again`);
}

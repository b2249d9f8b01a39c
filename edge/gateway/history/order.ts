import type { Kept } from '../../../bus/subjects.js';

/** How long a message that came before the one it follows waits for it, before the edge reads the gap from the history. */
export const GAP_WAIT_MS = 1_000;
/** Reads of a gap tried (GAP_WAIT_MS apart) while the history is out of reach, before the gap is skipped. */
export const GAP_READS = 8;
/** Messages (and their bytes) one chain may have waiting for a gap on this edge: past either they go out in offset order at once. */
export const MAX_WAITING = 1_000;
export const MAX_WAITING_BYTES = 8 * 1024 * 1024;

interface Waiting {
  kept: Kept;
  deliver: () => void;
  bytes: number;
}

interface ChainState {
  /** The last offset delivered here; null until the chain's head is read (messages wait meanwhile). */
  last: number | null;
  epoch: string | null;
  /** By the offset each follows. */
  waiting: Map<number, Waiting>;
  waitingBytes: number;
  timer: NodeJS.Timeout | null;
  /** Reads of the gap that failed in a row (the history out of reach: a NATS node restarting). */
  failedReads: number;
  /** Waiting for the replay that started the chain here to end (`seed`): what comes waits, bounded. */
  seeding: boolean;
}

export interface LiveOrderDeps {
  /** The chain's head as the history has it now (null: the history cannot be read). */
  head: (appId: string) => Promise<{ epoch: string; last: number } | null>;
  /** Kept messages after `after`, up to `until`, for a gap: delivered through `deliverText`. Null: cannot be read. */
  fill: (appId: string, after: number, until: number) => Promise<Array<{ seq: number; prev: number; text: string | null }> | null>;
  deliverText: (appId: string, seq: number, text: string) => void;
  onSkip: (appId: string, from: number, to: number) => void;
}

/**
 * Live messages in offset order on one edge (docs/gateway.md "History and recovery"): each kept
 * message names the offset it follows, so an edge delivers it only after that one. Sends through
 * different edges (or app replicas) reach an edge in any order; one that comes early waits for the
 * message it follows, at most GAP_WAIT_MS, after which the gap is read from the history (a sender
 * that died between keeping and sending leaves one), or, unreadable, skipped and counted.
 */
export class LiveOrder {
  private readonly chains = new Map<string, ChainState>();

  constructor(private readonly deps: LiveOrderDeps) {}

  /**
   * This edge holds a connection of the chain now: messages are ordered from the chain's head, read
   * now; or, for a first connection that asked for recovery (`seeded`), from where its replay ends
   * (`seed`). A head read apart from the replay's could be later than it: a message kept between
   * the two reads would be neither in the replay nor delivered live (taken as kept before this edge
   * held the chain), and that connection would never get it.
   */
  track(appId: string, seeded = false): void {
    if (this.chains.has(appId)) return;
    const state: ChainState = { last: null, epoch: null, waiting: new Map(), waitingBytes: 0, timer: null, failedReads: 0, seeding: seeded };
    this.chains.set(appId, state);
    this.arm(appId, state);
    if (!seeded) this.readHead(appId, state);
  }

  /**
   * Where the replay of the connection that started the chain here ended (its offset and epoch), or
   * null when it did not end with one (the history out of reach, the connection gone): then the
   * head is read. Nothing once the chain's order is known.
   */
  seed(appId: string, at: { epoch: string; last: number } | null): void {
    const state = this.chains.get(appId);
    if (!state || state.last !== null) return;
    state.seeding = false;
    if (!at) return this.readHead(appId, state);
    this.start(state, at);
  }

  private readHead(appId: string, state: ChainState): void {
    void this.deps.head(appId).then(
      (head) => {
        if (this.chains.get(appId) !== state || state.last !== null) return;
        if (!head) return this.flush(appId, state);
        this.start(state, head);
      },
      () => this.flush(appId, state),
    );
  }

  private start(state: ChainState, head: { epoch: string; last: number }): void {
    state.epoch = head.epoch;
    // What waited and is not after the head was kept before this edge held the chain (or was in the replay).
    state.last = head.last;
    for (const [prev, w] of state.waiting) if (w.kept.seq <= head.last) this.take(state, prev, w);
    this.drain(state);
  }

  /** The edge holds no connection of the chain any more. */
  untrack(appId: string): void {
    const state = this.chains.get(appId);
    if (state?.timer) clearTimeout(state.timer);
    this.chains.delete(appId);
  }

  /** The last offset delivered on this edge for the chain (null: not known yet). */
  lastOf(appId: string): number | null {
    return this.chains.get(appId)?.last ?? null;
  }

  /** Where the chain's order stands on this edge, with its epoch (null: not started yet). */
  orderOf(appId: string): { epoch: string; last: number } | null {
    const state = this.chains.get(appId);
    return state && state.last !== null && state.epoch !== null ? { epoch: state.epoch, last: state.last } : null;
  }

  /** A kept message for the chain: delivered now if it follows the last, later if it came early, never twice. */
  accept(appId: string, kept: Kept, deliver: () => void, bytes = 0): void {
    const state = this.chains.get(appId);
    if (!state) return deliver();
    if (state.epoch !== null && kept.epoch !== state.epoch) return deliver(); // another chain (a reinstall): not ordered with this one
    if (state.last !== null && kept.seq <= state.last) return; // delivered already, or kept before this edge held the chain
    if (state.last !== null && kept.prev === state.last) {
      state.last = kept.seq;
      deliver();
      this.drain(state);
      return;
    }
    const replaced = state.waiting.get(kept.prev);
    state.waiting.set(kept.prev, { kept, deliver, bytes });
    state.waitingBytes += bytes - (replaced?.bytes ?? 0);
    if (state.waiting.size > MAX_WAITING || state.waitingBytes > MAX_WAITING_BYTES) return this.flush(appId, state);
    this.arm(appId, state);
  }

  private take(state: ChainState, prev: number, w: Waiting): void {
    state.waiting.delete(prev);
    state.waitingBytes -= w.bytes;
  }

  private drain(state: ChainState): void {
    for (let next = state.waiting.get(state.last!); next; next = state.waiting.get(state.last!)) {
      this.take(state, state.last!, next);
      state.last = next.kept.seq;
      next.deliver();
    }
    if (state.waiting.size === 0 && state.timer) {
      clearTimeout(state.timer);
      state.timer = null;
    }
  }

  private arm(appId: string, state: ChainState): void {
    if (state.timer) return;
    state.timer = setTimeout(() => {
      state.timer = null;
      if (this.chains.get(appId) === state && state.waiting.size > 0) void this.fillGap(appId, state);
    }, GAP_WAIT_MS);
    state.timer.unref?.();
  }

  /** The gap read from the history and delivered; what cannot be read (GAP_READS times) is skipped. */
  private async fillGap(appId: string, state: ChainState): Promise<void> {
    // A replay still being read decides where the chain starts: what came waits for it (bounded by MAX_WAITING).
    if (state.seeding) return this.arm(appId, state);
    if (state.last === null) return this.flush(appId, state);
    const until = Math.min(...[...state.waiting.values()].map((w) => w.kept.seq));
    const entries = await this.deps.fill(appId, state.last, until).catch(() => null);
    if (this.chains.get(appId) !== state) return;
    // Out of reach (a NATS node restarting, JetStream electing a leader): tried again, the messages
    // still waiting (bounded), rather than skipped at once.
    if (entries === null && ++state.failedReads < GAP_READS) return this.arm(appId, state);
    state.failedReads = 0;
    // The store's order is the chain's: what it holds between the last delivered and the first waiting is the gap.
    for (const e of entries ?? []) {
      if (e.seq >= until) break;
      state.last = e.seq;
      if (e.text !== null) this.deps.deliverText(appId, e.seq, e.text);
    }
    this.drain(state);
    if (state.waiting.size > 0) this.flush(appId, state);
  }

  /** Everything waiting goes out in offset order, the gaps before each skipped (and counted). */
  private flush(appId: string, state: ChainState): void {
    const all = [...state.waiting.values()].sort((a, b) => a.kept.seq - b.kept.seq);
    state.waiting.clear();
    state.waitingBytes = 0;
    for (const w of all) {
      if (state.last !== null && w.kept.seq <= state.last) continue;
      if (state.last !== null && w.kept.prev !== state.last) this.deps.onSkip(appId, state.last, w.kept.prev);
      state.last = w.kept.seq;
      w.deliver();
    }
    if (state.epoch === null && all.length > 0) state.epoch = all[0]!.kept.epoch;
  }
}

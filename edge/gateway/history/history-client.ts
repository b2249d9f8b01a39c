import type { Bus } from '../../../bus/bus.js';
import { ask } from '../../../bus/verbs.js';
import {
  history,
  HISTORY_PAGE_ENTRIES,
  historyAppOf,
  historyBoundsOf,
  type AppView,
  type HistoryApp,
  type HistoryBounds,
  type Kept,
  type KeptEntry,
  type Position,
  type Recovery,
} from '../../../bus/subjects.js';

const OFF: Recovery = { recovered: false, epoch: null, offset: null, missed: 0, reason: 'off', replay: [], bytes: 0, read: 0 };

/**
 * The edge's side of gateway history (docs/gateway.md "History and recovery"): what it asks the
 * history actor (actors/history/, bus/subjects-history.ts). The edge keeps only what belongs to its
 * live connections (their live order, order.ts; the replay budget, replay-budget.ts); the store,
 * its seal and its bounds are the actor's. An app whose manifest turns history off is never asked
 * about: its sends say `kept: false` and its recoveries `off` here, as before.
 */
export class HistoryClient {
  constructor(
    private readonly bus: Bus,
    /** The operator's ceilings (the same settings the actor bounds by): what a replay may read at most is reserved with them. */
    private readonly ceilings: HistoryBounds,
  ) {}

  /** The app's bounds (the operator's ceilings, lowered by its manifest), or null when it keeps no history. */
  boundsOf(app: AppView): HistoryBounds | null {
    return historyBoundsOf(this.ceilings, app.websocket?.history);
  }

  /** Keeps `text` for the app's user (answered once it is durable); null when the app keeps none. */
  async keep(app: AppView, text: string): Promise<(Kept & { whole: boolean }) | null> {
    if (!this.boundsOf(app)) return null;
    return (await ask(this.bus, history.keep, { app: historyAppOf(app), text })).kept;
  }

  /** Where the app's chain stands: its epoch and last offset. */
  head(app: AppView): Promise<{ epoch: string; last: number }> {
    return ask(this.bus, history.head, { app: historyAppOf(app) });
  }

  /**
   * What a connection asking from `since` missed, or why it cannot have it. The actor answers the
   * verdict with the replay's first page; the rest is read a page at a time (an answer stays well
   * under NATS's max payload). A message of the replay gone meanwhile (the bounds dropped it: more
   * came since) makes it a `gap`, as the same recovery a moment later would have been.
   */
  async recover(app: AppView, since: Position | null | 'malformed'): Promise<Recovery> {
    if (!this.boundsOf(app)) return OFF;
    const asked = historyAppOf(app);
    const { rest, ...first } = await ask(this.bus, history.recover, { app: asked, ...(since === 'malformed' ? { malformed: true } : since ? { since } : {}) });
    if (rest === 0) return first;
    const gap: Recovery = { recovered: false, epoch: first.epoch, offset: first.offset, missed: 0, reason: 'gap', replay: [], bytes: 0, read: first.read };
    const replay = [...first.replay];
    let left = rest;
    while (left > 0) {
      const page = await this.page(asked, replay[replay.length - 1]!.seq, Math.min(left, HISTORY_PAGE_ENTRIES));
      if (page.entries.length === 0) return gap;
      for (const e of page.entries.slice(0, left)) {
        if (e.text === null || e.seq > first.offset!) return gap;
        replay.push({ seq: e.seq, text: e.text });
        left--;
      }
    }
    return replay[replay.length - 1]!.seq === first.offset ? { ...first, replay } : gap;
  }

  /** Kept messages of the app's chain after `after` and before `until` (a gap an edge fills), at most `max`, read a page at a time. */
  async between(app: AppView, after: number, until: number, max = 1_000): Promise<KeptEntry[]> {
    const asked = historyAppOf(app);
    const out: KeptEntry[] = [];
    for (let cursor = after; out.length < max; ) {
      const limit = Math.min(HISTORY_PAGE_ENTRIES, max - out.length);
      const page = await this.page(asked, cursor, limit);
      for (const e of page.entries) {
        if (e.seq >= until) return out;
        out.push(e);
      }
      if (page.entries.length === 0 || (!page.more && page.entries.length < limit)) return out;
      cursor = page.entries[page.entries.length - 1]!.seq;
    }
    return out;
  }

  private page(app: HistoryApp, after: number, limit: number) {
    return ask(this.bus, history.after, { app, after, limit });
  }
}

import { join } from 'node:path';
import type { AppView } from '../../../bus/subjects.js';
import type { RoleContext } from '../../../lib/runtime/runtime.js';
import { HistorySeal } from './seal.js';
import { chainOf, type HistoryBounds, type HistoryStore, type Kept } from './store.js';
import { LmdbHistory } from './store-lmdb.js';
import { JetStreamHistory } from './store-jetstream.js';
import { retryWhileStarting } from '../../../lib/state/jetstream.js';

/** Why a connection that asked was not recovered (docs/protocol.md "History and recovery"). */
export type NotRecovered = 'new' | 'epoch' | 'gap' | 'off' | 'unavailable';

/** What a recovering connection is told first, and what it is then sent. */
export interface Recovery {
  recovered: boolean;
  epoch: string | null;
  /** Where the connection is after the replay: the chain's last offset (0: nothing kept yet). */
  offset: number | null;
  missed: number;
  reason?: NotRecovered;
  /** The missed messages, in order: their offsets and texts. */
  replay: Array<{ seq: number; text: string }>;
  /** Bytes replayed. */
  bytes: number;
  /**
   * Bytes of history opened (decrypted) to decide it, replayed or not (a recovery that ends in
   * `gap` after reading costs the same): what the user's replay budget is charged, besides a fixed
   * cost per recovering upgrade (docs/protocol.md "History and recovery").
   */
  read: number;
}

/** A position a client names: `<epoch>:<offset>`, as the recovery frame gave it. */
export interface Position {
  epoch: string;
  offset: number;
}

const POSITION = /^([a-z0-9]{1,24}-[0-9a-f]{8}):(\d{1,15})$/;

/** `recover=<epoch>:<offset>` → the position; empty → none asked; anything else → malformed (a gap, never an error). */
export function parsePosition(value: string): Position | null | 'malformed' {
  if (value === '') return null;
  const m = POSITION.exec(value);
  return m ? { epoch: m[1]!, offset: Number(m[2]) } : 'malformed';
}

/**
 * The edge's side of gateway history (docs/gateway.md "History and recovery"): keeps what an app
 * sends to its user, and reads back what a reconnecting connection missed, within the app's bounds.
 * Its store is LMDB in one process and JetStream in the cluster shape; with neither (history off,
 * no key to seal it with, several edges on local state) there is none, and sends say `kept: false`.
 */
export class GatewayHistory {
  private constructor(
    private readonly store: HistoryStore,
    private readonly ceilings: HistoryBounds,
    readonly messageBytes: number,
  ) {}

  /** Over a store of one's own (tests). */
  static over(store: HistoryStore, ceilings: HistoryBounds, messageBytes: number): GatewayHistory {
    return new GatewayHistory(store, ceilings, messageBytes);
  }

  /**
   * The history of this edge, or null. Why it is off for want of a setting is said by the edge at
   * start, every cause at once (edge/gateway/history-off.ts); here only what that cannot know.
   */
  static async open(ctx: RoleContext): Promise<GatewayHistory | null> {
    const h = ctx.config.gateway.history;
    if (!h.on || !h.keys) return null;
    const seal = new HistorySeal(h.keys);
    if (ctx.bus.kind === 'memory') return new GatewayHistory(await LmdbHistory.open(join(ctx.config.dataDir, 'gateway-history'), seal, h.ceilings.ttlMs), h.ceilings, h.messageBytes);
    if (ctx.config.state.kind !== 'jetstream') return null;
    if (!ctx.jetstream) {
      ctx.log.warn({}, 'gateway history: off on this edge: its NATS identity has no login to its JetStream state account (rerun `pier bus init` and give the edge its new .nats.env); sends answer kept: false');
      return null;
    }
    // JetStream may be electing its leaders (a NATS node restarting): waited for, as the other state roles do.
    const jsm = await retryWhileStarting(() => ctx.jetstream!.manager());
    const store = await JetStreamHistory.open(ctx.jetstream.js, jsm, seal, { replicas: ctx.config.state.replicas, ceilings: h.ceilings, storeBytes: h.storeBytes, messageBytes: h.messageBytes });
    return new GatewayHistory(store, h.ceilings, h.messageBytes);
  }

  /** The app's bounds (the operator's ceilings, lowered by its manifest), or null when it keeps no history. */
  boundsOf(app: AppView): HistoryBounds | null {
    const asked = app.websocket?.history;
    if (asked === false) return null;
    const c = this.ceilings;
    return {
      messages: Math.min(c.messages, asked?.messages ?? c.messages),
      bytes: Math.min(c.bytes, asked?.bytes ?? c.bytes),
      ttlMs: Math.min(c.ttlMs, (asked?.ttl ?? c.ttlMs / 1000) * 1000),
    };
  }

  /** Keeps `text` for the app's user; a message over the size kept is recorded as a hole. Null when the app keeps none. */
  async keep(app: AppView, text: string): Promise<(Kept & { whole: boolean }) | null> {
    const bounds = this.boundsOf(app);
    if (!bounds) return null;
    const bytes = Buffer.byteLength(text);
    const whole = bytes <= this.messageBytes && bytes <= bounds.bytes;
    return { ...(await this.store.append(chainOf(app), whole ? text : null, bytes, bounds)), whole };
  }

  /** Where the app's chain stands: its epoch and last offset. */
  head(app: AppView) {
    return this.store.head(chainOf(app));
  }

  /**
   * What a connection asking from `since` missed, within the app's bounds; or why it cannot have it.
   * A position this history never gave (forged, another chain's, in the future) is a `gap` or an
   * `epoch`, found by comparing, never by scanning more than the bounds.
   */
  async recover(app: AppView, since: Position | null | 'malformed'): Promise<Recovery> {
    const bounds = this.boundsOf(app);
    if (!bounds) return { recovered: false, epoch: null, offset: null, missed: 0, reason: 'off', replay: [], bytes: 0, read: 0 };
    const chain = chainOf(app);
    let head;
    try {
      head = await this.store.head(chain);
    } catch {
      return { recovered: false, epoch: null, offset: null, missed: 0, reason: 'unavailable', replay: [], bytes: 0, read: 0 };
    }
    let read = 0;
    const at = (reason: NotRecovered): Recovery => ({ recovered: false, epoch: head.epoch, offset: head.last, missed: 0, reason, replay: [], bytes: 0, read });
    if (since === null) return at('new');
    if (since === 'malformed') return at('gap');
    if (since.epoch !== head.epoch) return at('epoch');
    if (since.offset === head.last) return { recovered: true, epoch: head.epoch, offset: head.last, missed: 0, replay: [], bytes: 0, read };
    if (since.offset > head.last) return at('gap');
    const oldest = Date.now() - bounds.ttlMs;
    let entries;
    try {
      // Nothing after the asked offset was dropped when the message at it is still kept (the bounds
      // drop the oldest first) and within the app's age; an offset of another chain, or one never
      // given, is not kept in this one. From 0: the chain's first message must be its first ever.
      const anchor = since.offset === 0 ? null : await this.store.at(chain, since.offset);
      if (since.offset !== 0 && (!anchor || anchor.at < oldest)) return at('gap');
      // One more than the bound, in messages and in bytes: more than the bound missed is a gap,
      // found without reading (or decrypting) more than the bound.
      entries = await this.store.after(chain, since.offset, bounds.messages + 1, bounds.bytes);
    } catch {
      return { ...at('unavailable'), epoch: null, offset: null };
    }
    // What was opened (decrypted) is charged; a hole, or the entry past the bound, was not.
    for (const e of entries) if (e.text !== null) read += e.bytes;
    const first = entries[0];
    if (!first || entries.length > bounds.messages || (since.offset === 0 && (first.prev !== 0 || first.at < oldest))) return at('gap');
    const replay: Recovery['replay'] = [];
    let bytes = 0;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.text === null) return at('gap');
      bytes += e.bytes;
      if (bytes > bounds.bytes) return at('gap');
      replay.push({ seq: e.seq, text: e.text });
    }
    return { recovered: true, epoch: head.epoch, offset: replay.length > 0 ? replay[replay.length - 1]!.seq : head.last, missed: replay.length, replay, bytes, read };
  }

  /** Kept messages of the app's chain after `after` (a gap an edge fills), at most `limit`. */
  entriesAfter(app: AppView, after: number, limit: number) {
    return this.store.after(chainOf(app), after, limit);
  }

  /** An app uninstalled: its history goes (a reinstall is a new chain anyway). */
  drop(user: string, app: string): Promise<void> {
    return this.store.drop(user, app);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

import { PierError } from '../../bus/errors.js';
import { appId } from '../../bus/ids.js';
import {
  HISTORY_PAGE_BYTES,
  HISTORY_PAGE_ENTRIES,
  historyBoundsOf,
  type AfterAnswer,
  type HistoryApp,
  type KeepAnswer,
  type NotRecovered,
  type Position,
  type Recovery,
  type RecoveryAnswer,
} from '../../bus/subjects.js';
import { chainOf, type HistoryBounds, type HistoryStore } from './store.js';

/**
 * The history actor's side of gateway history (docs/gateway.md "History and recovery"): keeps what
 * an app sends to its user, and reads back what a reconnecting connection missed, within the app's
 * bounds. Its store is LMDB in one process and JetStream in the cluster shape (index.ts opens it).
 * The edge holds the connections, their live order and their replay budget; this holds the store.
 */
export class GatewayHistory {
  private constructor(
    private readonly store: HistoryStore,
    private readonly ceilings: HistoryBounds,
    readonly messageBytes: number,
  ) {}

  /** Over a store (index.ts; tests give their own). */
  static over(store: HistoryStore, ceilings: HistoryBounds, messageBytes: number): GatewayHistory {
    return new GatewayHistory(store, ceilings, messageBytes);
  }

  /** The app's bounds (the operator's ceilings, lowered by its manifest), or null when it keeps no history. */
  boundsOf(app: HistoryApp): HistoryBounds | null {
    return historyBoundsOf(this.ceilings, app.history);
  }

  /** Keeps `text` for the app's user; a message over the size kept is recorded as a hole. Null when the app keeps none. */
  async keep(app: HistoryApp, text: string): Promise<KeepAnswer> {
    const bounds = this.boundsOf(checked(app));
    if (!bounds) return { kept: null };
    const bytes = Buffer.byteLength(text);
    const whole = bytes <= this.messageBytes && bytes <= bounds.bytes;
    return { kept: { ...(await this.store.append(chainOf(app), whole ? text : null, bytes, bounds)), whole } };
  }

  /** Where the app's chain stands: its epoch and last offset. */
  head(app: HistoryApp) {
    return this.store.head(chainOf(checked(app)));
  }

  /**
   * What a connection asking from `since` missed, within the app's bounds; or why it cannot have it.
   * A position this history never gave (forged, another chain's, in the future) is a `gap` or an
   * `epoch`, found by comparing, never by scanning more than the bounds.
   */
  async recover(app: HistoryApp, since: Position | null | 'malformed'): Promise<Recovery> {
    const bounds = this.boundsOf(checked(app));
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

  /** A recovery as one answer: its replay's first page; the edge reads the rest (`rest` messages, up to `offset`) with `after`. */
  async recoverPaged(app: HistoryApp, since: Position | null | 'malformed'): Promise<RecoveryAnswer> {
    return firstPage(await this.recover(app, since));
  }

  /**
   * Kept entries of the app's chain after `after`, at most `limit`, and no more than a page of
   * them (HISTORY_PAGE_BYTES): `more` says the page ended there. A first entry larger than a page
   * is answered alone (a page always moves on): no larger than the `send` that carried it.
   */
  async after(app: HistoryApp, after: number, limit: number): Promise<AfterAnswer> {
    const chain = chainOf(checked(app));
    const entries = await this.store.after(chain, after, limit, HISTORY_PAGE_BYTES);
    // The store ends a list past the bytes asked for with that entry unopened: it is the next page's first.
    if (entries.reduce((n, e) => n + e.bytes, 0) <= HISTORY_PAGE_BYTES) return { entries, more: false };
    if (entries.length > 1) return { entries: entries.slice(0, -1), more: true };
    return { entries: await this.store.after(chain, after, 1), more: true };
  }

  /** An app uninstalled: its history goes (a reinstall is a new chain anyway). */
  drop(user: string, app: string): Promise<void> {
    return this.store.drop(user, app);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/** The replay's first page (at least one message; at most a page's bytes and entries, as `after`'s), and how many follow it. */
export function firstPage(r: Recovery): RecoveryAnswer {
  let bytes = 0;
  let n = 0;
  while (n < r.replay.length && (n === 0 || (n < HISTORY_PAGE_ENTRIES && bytes + Buffer.byteLength(r.replay[n]!.text) <= HISTORY_PAGE_BYTES))) bytes += Buffer.byteLength(r.replay[n++]!.text);
  return n === r.replay.length ? { ...r, rest: 0 } : { ...r, replay: r.replay.slice(0, n), rest: r.replay.length - n };
}

/**
 * A request's app, beyond its schema (bus/subjects-history.ts): its id is its user and name, so a
 * request cannot name one chain and be taken for another's.
 */
function checked(app: HistoryApp): HistoryApp {
  if (app.id !== appId(app.user, app.name)) throw new PierError('BAD_REQUEST', `history: app id "${app.id.slice(0, 64)}" is not ${app.user}/${app.name}`);
  return app;
}

import type { GatewayEvent } from '../../bus/subjects.js';
import type { CallbackTarget } from '../../lib/policy/callback-target.js';

/** What a callback replica holds for one connection: its queue of events not yet delivered. */
export interface ConnState {
  connId: string;
  edge: string;
  user: string;
  app: string;
  /**
   * Where the app took callbacks when this replica first saw the connection, from its own registry
   * view: kept, so the close of a connection whose app was uninstalled meanwhile still reaches it.
   */
  target: CallbackTarget;
  queue: GatewayEvent[];
  lastSeq: number;
  running: boolean;
  /** Its close is queued or delivered: nothing may follow. */
  closed: boolean;
  /**
   * Aborted when the edge moves the connection to another replica: the delivery running then stops
   * retrying (and is not reported settled: the new holder delivers it), so a slow or failing app
   * cannot get it from here after the new holder delivered later events and the close.
   */
  handedOver: AbortController;
}

/**
 * The connections whose events this replica delivers. Closed ones are remembered for a while
 * (tombstones), so a late event for them is refused instead of being delivered after `close`.
 */
export class ConnTable {
  private readonly conns = new Map<string, ConnState>();
  private readonly tombstones = new Map<string, number>();

  constructor(private readonly tombstoneMs = 10 * 60_000) {}

  get(connId: string): ConnState | undefined {
    return this.conns.get(connId);
  }

  isClosed(connId: string): boolean {
    return this.conns.get(connId)?.closed === true || this.tombstones.has(connId);
  }

  /** Starts holding the connection of `ev` (not held yet), delivering to `target`. */
  create(ev: GatewayEvent, target: CallbackTarget): ConnState {
    const c: ConnState = { connId: ev.connId, edge: ev.edge, user: ev.user, app: ev.app, target, queue: [], lastSeq: 0, running: false, closed: false, handedOver: new AbortController() };
    this.conns.set(ev.connId, c);
    return c;
  }

  /** Forgets a connection whose close was delivered (or dropped). */
  finish(connId: string): void {
    this.conns.delete(connId);
    this.tombstones.set(connId, Date.now());
    if (this.tombstones.size > 100_000) this.prune();
  }

  /** Forgets a connection another replica took over (no tombstone: it may come back here). */
  drop(connId: string): void {
    this.conns.delete(connId);
  }

  ofEdge(edge: string): ConnState[] {
    return [...this.conns.values()].filter((c) => c.edge === edge);
  }

  size(): number {
    return this.conns.size;
  }

  /** Some connection still has events to deliver. */
  busy(): boolean {
    for (const c of this.conns.values()) if (c.queue.length > 0) return true;
    return false;
  }

  /** The connections with events still queued. */
  pending(): ConnState[] {
    return [...this.conns.values()].filter((c) => c.queue.length > 0);
  }

  private prune(): void {
    const cutoff = Date.now() - this.tombstoneMs;
    for (const [id, at] of this.tombstones) if (at < cutoff) this.tombstones.delete(id);
  }
}

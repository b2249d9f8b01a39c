import { onlyInTrace } from '../../bus/trace.js';
import { asPierError, PierError } from '../../bus/errors.js';
import { gatewayEventId } from '../../bus/ids.js';
import { closeData, type EventAck, type GatewayEvent } from '../../bus/subjects.js';
import type { CallbackTarget } from '../../lib/policy/callback-target.js';
import { ConnTable, type ConnState } from './connections.js';

/** `handedOver`: the delivery was stopped because the connection moved to another replica (not settled here). */
export type Delivery = (ev: GatewayEvent, conn: ConnState) => Promise<'delivered' | 'dropped' | 'refused' | 'handedOver'>;

/** The app's callback target from this replica's own registry view; throws (a PierError) when it has none. */
export type TargetOf = (user: string, app: string) => CallbackTarget;

/**
 * A callback replica's queues, one FIFO per connection (the rules are in bus/subjects-gateway.ts):
 * events are taken strictly in `seq` order — a duplicate is acknowledged and ignored, a gap is
 * refused with the seq expected so the edge sends again from there — and delivered one at a time;
 * each delivered (or given-up) event is reported `settled`. A close is last: nothing of a
 * connection is taken after it. A connection's target is looked up once, when the replica first
 * takes one of its events, never read from an event: an event it has no target for is refused.
 */
export class ConnQueues {
  private readonly table: ConnTable;

  constructor(
    private readonly deliver: Delivery,
    private readonly settled: (ev: GatewayEvent) => void,
    private readonly targetOf: TargetOf,
    tombstoneMs?: number,
  ) {
    this.table = new ConnTable(tombstoneMs);
  }

  /** An event from the edge holding its connection: the answer the edge gets. */
  accept(ev: GatewayEvent): EventAck {
    if (this.table.isClosed(ev.connId)) return { ok: true, closed: true };
    const known = this.table.get(ev.connId);
    // A replica new to the connection starts at the edge's oldest unsettled event.
    const next = known ? known.lastSeq + 1 : ev.oldest;
    if (ev.seq < next) return { ok: true, closed: false };
    if (ev.seq > next) return { ok: true, closed: false, expected: next };
    if (known && (known.user !== ev.user || known.app !== ev.app)) {
      return refusal(new PierError('BAD_REQUEST', 'the event names another app than its connection'));
    }
    let conn = known;
    if (!conn) {
      try {
        conn = this.table.create(ev, this.targetOf(ev.user, ev.app));
      } catch (err) {
        return refusal(err);
      }
    }
    this.enqueue(conn, ev);
    return { ok: true, closed: false };
  }

  /**
   * The edge sends this connection's events to another replica now (it told this one after the
   * events it had sent here, so nothing of the connection sent here later can come before it).
   * What this replica held of it is dropped, queued events too (the edge sends every unsettled one
   * on), the delivery running now stops retrying and is not reported settled (an attempt already
   * on the wire may still reach the app: a redelivery, same event id), and its edge's death raises
   * no close here. If the connection comes back, its next event starts it again.
   */
  forget(connId: string, edge: string): void {
    const conn = this.table.get(connId);
    if (!conn || conn.edge !== edge) return;
    conn.queue.splice(conn.running ? 1 : 0);
    conn.handedOver.abort();
    this.table.drop(connId);
  }

  /** The edge holding these connections died: each gets its close, after what is queued. */
  edgeLost(edgeBusId: string): GatewayEvent[] {
    const raised: GatewayEvent[] = [];
    for (const conn of this.table.ofEdge(edgeBusId)) {
      if (conn.closed) continue;
      const seq = conn.lastSeq + 1;
      // It says so (edgeLost): the edge may have held events this replica never got.
      const close: GatewayEvent = { eventId: gatewayEventId(conn.connId, seq, 'close'), connId: conn.connId, edge: conn.edge, user: conn.user, app: conn.app, seq, oldest: seq, action: 'close', data: closeData('edgeLost'), cookie: null };
      this.enqueue(conn, close);
      raised.push(close);
    }
    return raised;
  }

  size(): number {
    return this.table.size();
  }

  /** What is still to deliver, by connection: its app, its target and how many events. */
  undelivered(): Array<{ user: string; app: string; target: CallbackTarget; events: number }> {
    return this.table.pending().map((c) => ({ user: c.user, app: c.app, target: c.target, events: c.queue.length }));
  }

  /** Some connection still has events to deliver. */
  busy(): boolean {
    return this.table.busy();
  }

  private enqueue(conn: ConnState, ev: GatewayEvent): void {
    conn.queue.push(ev);
    conn.lastSeq = ev.seq;
    if (ev.action === 'close') conn.closed = true;
    // The loop outlives the request that started it: it runs outside that request's trace (each event's delivery is in its own).
    if (!conn.running) void onlyInTrace(undefined, () => this.drain(conn));
  }

  private async drain(conn: ConnState): Promise<void> {
    conn.running = true;
    while (conn.queue.length > 0) {
      const ev = conn.queue[0];
      const outcome = await this.deliver(ev, conn).catch(() => 'dropped' as const);
      conn.queue.shift();
      // Handed over: the replica that holds the connection now delivers it, and settles it.
      if (outcome === 'handedOver') break;
      // The edge keeps each event until it hears this: a replica lost before delivering does not lose it.
      this.settled(ev);
      // (A connection handed over is not this replica's to finish: it may be back here already, afresh.)
      if (ev.action === 'close' && !conn.handedOver.signal.aborted) this.table.finish(conn.connId);
    }
    conn.running = false;
  }
}

function refusal(err: unknown): EventAck {
  return { ok: false, error: asPierError(err).toWire() };
}

import { at } from '../../bus/exchange.js';
import { onlyInTrace } from '../../bus/trace.js';
import { ask, tell } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { gatewayChannels, gatewaySubjects, movedSigned, type GatewayEvent } from '../../bus/subjects.js';
import type { Logger } from '../../lib/runtime/log.js';
import type { Peers } from '../../lib/runtime/peers.js';
import { CallbackReplicas } from './gateway-replicas.js';

interface Outbox {
  replica: string | null;
  /** Not yet settled (delivered or given up) by the callback replica, in seq order. */
  events: GatewayEvent[];
  /** Size of each unsettled event (the client's frame), by seq, and their sum: the bound of 4009. */
  /** Bytes of the unsettled messages by seq; null while there are none (most connections, most of the time). */
  sizes: Map<number, number> | null;
  bytes: number;
  resending: boolean;
  /** Since when the oldest unsettled event has waited (reset at each settlement). */
  since: number;
  /** Its close was emitted: the outbox goes once that is settled. */
  closed: boolean;
  /** The replica's last answer was a refusal (no target for the app in its registry view). */
  refused: boolean;
  /** The highest seq `replica` acknowledged taking (it delivers it without this edge); 0: none yet. */
  taken: number;
}

/** What a stopping edge left unsettled (flush): taken by a callback replica, which delivers it without the edge, or by none. */
export interface Unsettled {
  /** Taken by the callback role of this process: its own stop delivers them, or reports what it could not. */
  here: number;
  /** Taken by replicas elsewhere whose app has not answered for STALLED_MS: they go on trying. */
  elsewhere: number;
  /** Taken by no replica within the bound: nothing delivers them. */
  untaken: number;
}

/**
 * A stopping edge does not wait for a connection whose app has not answered for this long: the
 * replica that took its events goes on trying without the edge, and a target that is down would
 * only hold the stop for the whole bound (issue #53).
 */
const STALLED_MS = 1_000;

/** How long events have waited is a duration: a wall clock stepped forward must not give them up. */
const monotonicMs = () => performance.now();

/**
 * Sends each connection's gateway events to one callback replica, in order. The replica is chosen
 * by rendezvous hashing over the live callback replicas, so every edge picks the same one for a
 * connection and a lost replica moves only its own connections. Events stay here until the replica
 * says they are settled (delivered, or given up after the retry period); if the replica fails or
 * dies, the unsettled ones are sent again, in order, to the next choice (an app may then see an
 * event twice, with the same X-Pier-Event-Id, never lose one).
 */
export class EventForwarder {
  private readonly outboxes = new Map<string, Outbox>();
  /** The callback replicas events may go to, and which one a connection's go to (gateway-replicas.ts). */
  private readonly replicaSet: CallbackReplicas;
  /** Set by close(): no event is sent again after it. */
  private closed = false;

  constructor(
    private readonly bus: Bus,
    private readonly peers: Peers,
    /** `retryMs`: the pause before unsettled events are sent again (250 ms unless given; unit tests give less). */
    private readonly options: { giveUpMs: number; ackTimeoutMs: number; maxEvents: number; maxBytes: number; retryMs?: number },
    private readonly log: Logger,
    /** The callback replica already raised this connection's close (the edge was thought dead). */
    private readonly onClosedByCluster: (connId: string) => void,
    /**
     * This connection's unsettled events were given up (no replica took them for the whole retry
     * period): the caller ends the connection, so nothing it sends later is delivered after a gap.
     */
    private readonly onGaveUp: (connId: string, dropped: number) => void = () => undefined,
  ) {
    this.replicaSet = new CallbackReplicas(bus, peers);
    this.stopWatching = peers.onDeath((peer) => {
      if (!peer.roles.includes('callback')) return;
      this.replicaSet.forget(peer.busId);
      for (const [connId, box] of this.outboxes) if (box.replica === peer.busId) this.retryLater(box, connId);
    });
  }

  /** How many callback replicas events can go to now (alive, and answered a hello). */
  replicas(): number {
    return this.replicaSet.usable().length;
  }

  private readonly stopWatching: () => void;

  /** The callback replica is done with events up to `seq` of `connId`. */
  settled(connId: string, seq: number): void {
    const box = this.outboxes.get(connId);
    if (!box) return;
    box.events = box.events.filter((e) => e.seq > seq);
    if (box.sizes) {
      for (const [s, size] of box.sizes) {
        if (s > seq) continue;
        box.bytes -= size;
        box.sizes.delete(s);
      }
      if (box.sizes.size === 0) box.sizes = null;
    }
    box.since = monotonicMs();
    if (box.events.length === 0 && box.closed) this.outboxes.delete(connId);
  }

  close(): void {
    this.closed = true;
    this.stopWatching();
    this.replicaSet.close();
  }

  /**
   * Queues one event of a connection. Answers whether its unsettled events are now over the bound
   * (count or bytes): the caller closes the connection (4009), whose `close` is still accepted.
   */
  emit(ev: GatewayEvent, size = 0): boolean {
    let box = this.outboxes.get(ev.connId);
    if (!box) {
      box = { replica: this.replicaSet.choose(ev.connId), events: [], sizes: null, bytes: 0, resending: false, since: monotonicMs(), closed: false, refused: false, taken: 0 };
      this.outboxes.set(ev.connId, box);
    }
    if (box.events.length === 0) box.since = monotonicMs();
    if (ev.action === 'close') box.closed = true;
    box.events.push(ev);
    if (size > 0) {
      (box.sizes ??= new Map()).set(ev.seq, size);
      box.bytes += size;
    }
    if (!box.resending) this.send(box, ev);
    return box.events.length > this.options.maxEvents || box.bytes > this.options.maxBytes;
  }

  /**
   * A stop's wait (docs/gateway.md "The exact loss window"): resolves once no connection's events
   * need this edge any more, or after `timeoutMs`, answering what was left unsettled. A connection
   * needs it until each event is settled, or taken by its callback replica and either that replica
   * is this process's (whose stop comes next: it delivers them or reports them undelivered) or its
   * app has not answered for STALLED_MS (that replica goes on trying; the edge would wait in vain).
   * Until an event is taken it needs the edge: nobody else holds it.
   */
  async flush(timeoutMs: number): Promise<Unsettled> {
    const end = Date.now() + timeoutMs;
    const needsEdge = (box: Outbox) => box.events.length > 0 && !(this.taken(box) && (box.replica === this.peers.self.busId || monotonicMs() - box.since >= STALLED_MS));
    while ([...this.outboxes.values()].some(needsEdge) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const left: Unsettled = { here: 0, elsewhere: 0, untaken: 0 };
    for (const box of this.outboxes.values()) {
      const n = box.events.length;
      if (!this.taken(box)) left.untaken += n;
      else if (box.replica === this.peers.self.busId) left.here += n;
      else left.elsewhere += n;
    }
    return left;
  }

  /** Every unsettled event of `box` was taken by the replica it has now. */
  private taken(box: Outbox): boolean {
    const last = box.events[box.events.length - 1];
    return box.replica !== null && last !== undefined && last.seq <= box.taken;
  }

  pending(): number {
    let n = 0;
    for (const b of this.outboxes.values()) n += b.events.length;
    return n;
  }

  private send(box: Outbox, ev: GatewayEvent): void {
    if (!box.replica) return this.retryLater(box, ev.connId);
    const to = box.replica;
    const sent = { ...ev, oldest: box.events[0]?.seq ?? ev.seq };
    // Sent in the event's own trace (its message's span), whatever work happens to send it.
    onlyInTrace(ev.trace ? { traceparent: ev.trace } : undefined, () => ask(this.bus, at(gatewayChannels.deliver, gatewaySubjects.deliver(box.replica!)), sent, { timeoutMs: this.options.ackTimeoutMs }))
      .then((ack) => {
        // Refused: the replica's registry view does not know the app (yet: it may lag this edge's
        // view, or any more). Sent again like a failure, and given up on after the retry period.
        if (!ack.ok) {
          box.refused = true;
          return this.retryLater(box, ev.connId);
        }
        // A gap (an earlier event lost on the way, or refused): everything unsettled goes again, in order.
        if (ack.expected !== undefined) {
          // It waits for an event this edge no longer holds (settled by another replica, or given
          // up): it would wait forever. Told the connection moved, it forgets it and takes the
          // resend afresh from the oldest unsettled event.
          const oldest = box.events[0]?.seq;
          if (box.replica !== null && oldest !== undefined && ack.expected < oldest) this.tellMoved(box.replica, ev.connId);
          return this.retryLater(box, ev.connId);
        }
        box.refused = false;
        // Taken: the replica delivers it (and what came before it) whether this edge stays or not.
        if (box.replica === to) box.taken = Math.max(box.taken, ev.seq);
        if (!ack.closed) return;
        // The cluster already raised this connection's close: nothing of it will be delivered.
        this.outboxes.delete(ev.connId);
        this.onClosedByCluster(ev.connId);
      })
      .catch(() => this.retryLater(box, ev.connId));
  }

  /**
   * The replica that had a connection's events is told it has them no more, after what it was
   * sent of them (same sender, same subscriber: in order): it forgets the connection, so its edge's
   * death later raises no second close there, and if the connection comes back to it, its events
   * start it afresh. A replica that is dead hears nothing, and holds nothing either.
   */
  private tellMoved(replica: string, connId: string): void {
    try {
      const notice = { connId, edge: this.peers.self.busId, at: Date.now() };
      tell(this.bus, at(gatewayChannels.moved, gatewaySubjects.moved(replica)), { ...notice, sig: this.peers.sign(movedSigned(replica, notice)) });
    } catch {
      // Disconnected: the replica, cut off too, is told nothing; see docs/operations.md ("Chaos").
    }
  }

  /**
   * Drops what no replica took for the whole retry period (docs/gateway.md "The exact loss
   * window"), and has the connection ended: a later frame would otherwise reach the app after the
   * gap as if nothing was missing. Its close is kept (it says how many events it follows, so the
   * app learns what it missed) and tried for one more period; a close given up too goes with the outbox.
   */
  private giveUp(box: Outbox, connId: string, why: string): void {
    const close = box.events.find((e) => e.action === 'close');
    const dropped = box.events.length - (close ? 1 : 0);
    this.log.error({ connId, events: dropped, close: close !== undefined }, why);
    if (!close || dropped === 0) this.outboxes.delete(connId);
    else {
      box.events = [close];
      box.sizes = null;
      box.bytes = 0;
      box.since = monotonicMs();
      box.refused = false;
      this.retryLater(box, connId);
    }
    if (dropped > 0) this.onGaveUp(connId, dropped);
  }

  /** Sends everything unacknowledged again, in order, to the replica chosen now. */
  private retryLater(box: Outbox, connId: string): void {
    if (box.resending) return;
    box.resending = true;
    setTimeout(() => {
      box.resending = false;
      // Closed (the edge stopped): nothing is sent again; the stop's flush said what was left.
      if (this.closed || box.events.length === 0) return;
      const overdue = monotonicMs() - box.since > this.options.giveUpMs;
      if (overdue && this.replicaSet.usable().length === 0) return this.giveUp(box, connId, 'no callback replica for too long: gateway events dropped');
      if (overdue && box.refused) return this.giveUp(box, connId, 'gateway events refused by the callback replica for the whole retry period: dropped');
      const next = this.replicaSet.choose(connId);
      if (box.replica !== null && next !== box.replica) this.tellMoved(box.replica, connId);
      if (next !== box.replica) box.taken = 0;
      box.replica = next;
      for (const ev of [...box.events]) this.send(box, ev);
    }, this.options.retryMs ?? 250);
  }
}

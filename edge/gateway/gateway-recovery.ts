import { PierError } from '../../bus/errors.js';
import { appId, parseAppId } from '../../bus/ids.js';
import { CLOSE_CODES, type AppView, type GatewayAction, type Recovery } from '../../bus/subjects.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import type { Conn } from './gateway-admission.js';
import type { Connections, Ws } from './gateway-connections.js';
import type { Delivery } from './gateway-delivery.js';
import type { GatewayMetrics } from './gateway-metrics.js';
import { messageFrame, recoveryFrame } from './history/frames.js';
import type { HistoryClient } from './history/history-client.js';
import { LiveOrder } from './history/order.js';
import { ReplayBudget } from './history/replay-budget.js';

const OFF: Recovery = { recovered: false, epoch: null, offset: null, missed: 0, reason: 'off', replay: [], bytes: 0, read: 0 };

/** Hands one event of a connection to the forwarder; answers whether its unsettled events are over their bound. */
export type Emit = (c: Conn, action: GatewayAction, data: unknown, cookie: string | null, size?: number) => boolean;

/**
 * What the edge does for gateway history with its live connections (docs/protocol.md "History and
 * recovery"): a recovering connection's budget and replay, and live messages in offset order. The
 * history itself is the history actor's, asked through `HistoryClient`.
 */
export class Recoveries {
  private readonly replayBudget: ReplayBudget;

  constructor(
    private readonly ctx: RoleContext,
    private readonly history: HistoryClient | null,
    private readonly connections: Connections,
    private readonly delivery: Delivery,
    private readonly metrics: GatewayMetrics,
    private readonly emit: Emit,
  ) {
    this.replayBudget = new ReplayBudget(ctx.config.gateway.history.replayBytesPerMin);
    delivery.order = history ? this.liveOrder(history) : null;
  }

  private appOf(id: string) {
    const parsed = parseAppId(id);
    return parsed ? this.ctx.cache.app(parsed.user, parsed.app) : undefined;
  }

  /** Kept messages in offset order on this edge: the chain's head and its gaps read from the history. */
  private liveOrder(history: HistoryClient): LiveOrder {
    return new LiveOrder({
      head: async (id) => {
        const app = this.appOf(id);
        return app ? history.head(app).catch(() => null) : null;
      },
      fill: async (id, after, until) => {
        const app = this.appOf(id);
        if (!app) return null;
        return history.between(app, after, until);
      },
      deliverText: (id, seq, text) => this.delivery.sendToChain(id, text, seq),
      onSkip: (id, from, to) => {
        this.metrics.gapsSkipped.inc();
        // A connection that asked for recovery is owed every message: it reconnects (4005) and
        // its replay, read when the history answers again, gives it what it missed here.
        const recovering = [...this.connections.socketsOf(id)].filter((ws) => ws.getUserData().recover && ws.getUserData().open);
        for (const ws of recovering) ws.end(CLOSE_CODES.MISSED, 'a message could not be delivered in order; reconnect to recover it');
        this.ctx.log.warn({ app: id, from, to, reconnecting: recovering.length }, 'gateway history: a gap in live messages could not be read; delivering on, connections that asked for recovery reconnect');
      },
    });
  }

  /**
   * A client recovering again and again is held to its user's budget (docs/protocol.md "History and
   * recovery"), whatever it asks (a malformed or hopeless position still costs reads): charged a
   * fixed cost now, before the work, and what it read once it is read. Throws the refusal (429).
   */
  reserve(conn: Conn): void {
    if (!conn.recover) return;
    const budget = this.replayBudget.allows(conn.user);
    if (!budget.ok) throw new PierError('RATE_LIMITED', `user "${conn.user}" replayed too much history lately; reconnect in ${budget.retryAfterS} s`);
    // The most it may read is taken now (what it did not read is given back once it is read): a
    // burst of recoveries cannot all pass before the first is charged.
    const app = this.ctx.cache.app(conn.user, conn.app);
    conn.recover.reserved = (app && this.history?.boundsOf(app)?.bytes) || 0;
    this.replayBudget.chargeUpgrade(conn.user);
    this.replayBudget.charge(conn.user, conn.recover.reserved);
  }

  /**
   * The replay of a connection that asked (docs/protocol.md "History and recovery"): the recovery
   * frame, what it missed, then what came live meanwhile (held, never sent twice: an offset at or
   * below the connection's position is not sent again); then its open callback, and the frames it
   * sent while this was read.
   */
  async recover(ws: Ws, c: Conn): Promise<void> {
    const r = c.recover!;
    const app = this.ctx.cache.app(c.user, c.app);
    const result = this.history && app ? await this.history.recover(app, r.since).catch((): Recovery => ({ ...OFF, reason: 'unavailable' })) : OFF;
    // What it read is charged whatever comes next (a browser gone meanwhile read as much): the
    // reservation taken at the upgrade is settled against it.
    this.replayBudget.settle(c.user, r.reserved, result.read);
    r.reserved = 0;
    const chain = appId(c.user, c.app);
    // Closed meanwhile: closed() has sent the open and the close (the chain's order, if this one
    // started it here, starts from the head instead).
    if (!r.replaying) return this.delivery.order?.seed(chain, null);
    // Live messages on this edge follow on from the replay's end, if this is the first replay to end
    // here; what comes meanwhile is held for this connection, which still replays.
    const end = result.epoch !== null && result.offset !== null ? { epoch: result.epoch, last: result.offset } : null;
    this.delivery.order?.seed(chain, end);
    let passed: Array<{ seq: number; text: string }> = [];
    if (end && app) {
      const caught = await this.caughtUp(ws, c.user, app, chain, end);
      // Ended (what it missed unreadable), or closed meanwhile: closed() sends its open and close.
      if (caught === null || !r.replaying) return;
      passed = caught;
    }
    r.replaying = false;
    this.metrics.recoveries.inc({ outcome: result.recovered ? 'recovered' : result.reason! });
    r.position = result.offset ?? 0;
    const held = r.held;
    r.held = [];
    r.heldBytes = 0;
    ws.cork(() => {
      if (!this.delivery.send(ws, recoveryFrame(result))) return;
      for (const m of result.replay) if (!this.delivery.send(ws, messageFrame(m.text, m.seq))) return;
      // After the replay and its frame (which say what the history answered), as live messages would come.
      for (const m of passed) if (!this.delivery.deliverTo(ws, m.text, m.seq) && !c.open) return;
      // A held message the replay already sent is skipped (deliverTo answers false), not the end of the held ones.
      for (const h of held) if (!this.delivery.deliverTo(ws, h.text, h.seq) && !c.open) return;
    });
    this.openEvent(c, result);
  }

  /**
   * What the chain on this edge has gone past beyond this connection's replay. Another connection's
   * replay, read later, may have started the chain's order here further on than this one ends (or its
   * head, read later): what lies between is taken as delivered on this edge and never comes live
   * again, so this connection reads it from the history, and gets it after its replay as live
   * messages (a 10-minute chaos run saw two connections of one user recover on one edge at once, and
   * the one whose replay was read first never got a message kept between the two reads). Unreadable,
   * or more than one read holds, the connection is ended with 4005 (null): its client reconnects, and
   * that replay gives it what it missed. What it reads is charged as a replay's read is.
   */
  private async caughtUp(ws: Ws, user: string, app: AppView, chain: string, end: { epoch: string; last: number }): Promise<Array<{ seq: number; text: string }> | null> {
    const ahead = this.delivery.order?.orderOf(chain);
    if (!ahead || ahead.epoch !== end.epoch || ahead.last <= end.last) return [];
    const entries = await this.history!.between(app, end.last, ahead.last + 1).catch(() => null);
    const reached = entries?.at(-1)?.seq ?? end.last;
    if (entries === null || reached < ahead.last) {
      if (ws.getUserData().open) ws.end(CLOSE_CODES.MISSED, 'messages this replay missed could not be read; reconnect to recover them');
      return null;
    }
    const passed: Array<{ seq: number; text: string }> = [];
    for (const e of entries) {
      this.replayBudget.charge(user, e.bytes);
      if (e.text !== null) passed.push({ seq: e.seq, text: e.text });
    }
    return passed;
  }

  /** The open callback of a connection that asked for recovery, then the frames it sent meanwhile. */
  openEvent(c: Conn, result: Pick<Recovery, 'recovered' | 'offset' | 'missed' | 'reason'>): void {
    const r = c.recover!;
    const since = typeof r.since === 'object' && r.since !== null ? r.since.offset : null;
    this.emit(c, 'open', { recovery: { recovered: result.recovered, since, offset: result.offset, missed: result.missed, ...(result.reason ? { reason: result.reason } : {}) } }, null);
    const inbound = r.inbound;
    r.inbound = [];
    r.inboundBytes = 0;
    for (const m of inbound) {
      if (this.emit(c, 'message', m.data, m.cookie, m.size) && c.open) {
        this.connections.get(c.connId)?.end(CLOSE_CODES.BACKLOG, 'too many events waiting for the app');
        return;
      }
    }
  }
}

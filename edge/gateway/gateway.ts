import { at } from '../../bus/exchange.js';
import { activeTracer } from '../../bus/trace.js';
import { hear, serve } from '../../bus/verbs.js';
import uWS from 'uWebSockets.js';
import type { Subscription } from '../../bus/bus.js';
import { appId, gatewayEventId } from '../../bus/ids.js';
import { admit, type Conn } from './gateway-admission.js';
import { aliveSigned, CLOSE_CODES, closeData, gatewayChannels, gatewaySubjects, type GatewayAction, type ListedConn } from '../../bus/subjects.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { asPierError, PierError } from '../../bus/errors.js';
import { errorReply } from '../http/envelope.js';
import { send } from '../http/uws-response.js';
import { EventForwarder } from './gateway-forwarder.js';
import { frameToData } from './client-frame.js';
import { isolated } from '../http/isolate.js';
import { Connections, type Ws } from './gateway-connections.js';
import { Delivery } from './gateway-delivery.js';
import { gatewayMetrics, type GatewayMetrics } from './gateway-metrics.js';
import { Recoveries } from './gateway-recovery.js';
import type { HistoryClient } from './history/history-client.js';

/** Where browsers open their WebSocket (docs/protocol.md "Gateway"). */
export const GATEWAY_PATH = '/ws';
/** Exactly this text: the platform's browser library compares the frame to it as a string. */
const PONG = '{"event":"pong"}';

/**
 * The browser side of the WebSocket gateway on the public listener, and this edge's share of the
 * app-side commands. Connections are held here only; everything about them that other processes
 * need travels on the bus: events to the callback actor, commands by connection (this edge's
 * subject) or by user (a subject this edge subscribes to only while it holds that user's connections).
 * This file is the connection's life (upgrade, open, frames, close) and the bus subscriptions; the
 * connections held are gateway-connections.ts, what goes out to them gateway-delivery.ts, a
 * recovering connection's budget and replay gateway-recovery.ts, events to the app gateway-forwarder.ts.
 */
export class Gateway {
  private readonly connections = new Connections();
  private readonly subs: Subscription[] = [];
  private readonly forwarder: EventForwarder;
  private readonly delivery: Delivery;
  private readonly recoveries: Recoveries;
  private sweeper: NodeJS.Timeout | null = null;
  private stopUninstallWatch: (() => void) | null = null;
  private readonly metrics: GatewayMetrics;
  private stopping = false;

  constructor(
    private readonly ctx: RoleContext,
    history: HistoryClient | null = null,
  ) {
    this.metrics = gatewayMetrics(ctx.metrics.registry);
    this.delivery = new Delivery(this.connections, this.metrics, ctx.config.gateway.outboundBufferBytes);
    this.recoveries = new Recoveries(ctx, history, this.connections, this.delivery, this.metrics, (c, action, data, cookie, size) => this.event(c, action, data, cookie, size));
    const g = ctx.config.gateway;
    this.forwarder = new EventForwarder(ctx.bus, ctx.peers, { giveUpMs: g.callbackRetryMs, ackTimeoutMs: 5_000, maxEvents: g.maxPendingEvents, maxBytes: g.maxPendingBytes }, ctx.log, (connId) => {
      const ws = this.connections.get(connId);
      if (!ws) return;
      ws.getUserData().silent = true;
      ws.end(CLOSE_CODES.LOST, 'connection lost by the gateway cluster');
    }, (connId) => {
      // Its frames after the gap would reach the app as if nothing were missing: ended, and its
      // close (which says how many events it follows) tells the app what it did not get.
      this.connections.get(connId)?.end(CLOSE_CODES.UNDELIVERABLE, 'events could not be delivered to the app; reconnect');
    });
  }

  count(): number {
    return this.connections.size;
  }

  /** Mounts `GET /ws` on the public listener (before its catch-all 404). */
  attach(app: uWS.TemplatedApp): void {
    const g = this.ctx.config.gateway;
    app.ws<Conn>(GATEWAY_PATH, {
      // uWS drops the socket without a close frame (1006) past its own limit; frames between our
      // limit and 16× it are refused here with a proper 1009.
      maxPayloadLength: g.maxFrameBytes * 16,
      // uWS must never drop a frame on its own: the 4008 limit is enforced in send().
      maxBackpressure: g.outboundBufferBytes * 4 + 64 * 1024,
      closeOnBackpressureLimit: 0,
      idleTimeout: 0,
      sendPingsAutomatically: false,
      // Every callback isolated: a throw is logged, counted and answered (500, or close 1011).
      upgrade: isolated('ws upgrade', this.ctx, (res, req, context) => this.upgrade(res, req, context), (res) => {
        void send(res, errorReply(new PierError('INTERNAL', 'internal error')), { aborted: false });
      }),
      open: isolated('ws open', this.ctx, (ws: Ws) => this.opened(ws), (ws) => ws.end(CLOSE_CODES.INTERNAL, 'internal error')),
      message: isolated('ws message', this.ctx, (ws: Ws, message: ArrayBuffer, isBinary: boolean) => this.received(ws, message, isBinary), (ws) => ws.end(CLOSE_CODES.INTERNAL, 'internal error')),
      close: isolated('ws close', this.ctx, (ws: Ws, code: number) => this.closed(ws, code)),
    });
  }

  start(): void {
    const { bus, peers, cache } = this.ctx;
    this.subs.push(
      serve(bus, at(gatewayChannels.command, gatewaySubjects.edge(peers.self.busId)), (cmd) => this.delivery.command(cmd)),
      hear(bus, at(gatewayChannels.settled, gatewaySubjects.settled(peers.self.busId)), ({ connId, seq }) => this.forwarder.settled(connId, seq)),
      // A callback replica that stopped hearing this edge asks before it raises its connections' closes.
      serve(bus, at(gatewayChannels.alive, gatewaySubjects.alive(peers.self.busId)), ({ nonce }) => ({ busId: peers.self.busId, sig: peers.sign(aliveSigned(peers.self.busId, nonce)) })),
      serve(bus, at(gatewayChannels.list, gatewaySubjects.list), ({ appId: wanted }) => {
        const conns: ListedConn[] = [];
        for (const ws of this.connections.values()) {
          const c = ws.getUserData();
          if (appId(c.user, c.app) === wanted) conns.push({ user: c.user, id: c.connId, userAgent: c.userAgent });
        }
        return { conns };
      }),
    );
    // Uninstalling an app closes its connections at once; revoking a user's token closes those opened
    // with it (each gets its close callback).
    this.stopUninstallWatch = cache.onApplied((c) => {
      if (c.kind === 'app' && c.op === 'delete') {
        // Its history goes with it: the history actor drops it (actors/history/).
        this.connections.closeWhere((d) => appId(d.user, d.app) === c.key, CLOSE_CODES.APP_UNINSTALLED, 'app uninstalled');
      }
      if (c.kind === 'token' && c.op === 'delete') this.connections.closeWhere((d) => d.tokenDigest === c.key, CLOSE_CODES.REVOKED, 'token revoked');
    });
    const idleMs = this.ctx.config.gateway.idleMs;
    // One pass over every connection a tick (100,000 of them on a big edge): idle ones, and those
    // of a token revoked with a full reload of the registry (no change event), are ended after it.
    this.sweeper = setInterval(() => {
      if (this.fenced()) return;
      const now = Date.now();
      this.connections.endWhere((d) => (now - d.lastSeen > idleMs ? [CLOSE_CODES.IDLE, 'idle timeout'] : cache.tokenRevoked(d.tokenDigest) ? [CLOSE_CODES.REVOKED, 'token revoked'] : null));
    }, Math.max(50, Math.min(1_000, Math.floor(idleMs / 4))));
  }

  /** Going away: every connection closed (1001), and their close events handed over. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.stopUninstallWatch?.();
    // What was sent before the stop goes out before each connection's 1001.
    this.delivery.flushGathered();
    for (const ws of [...this.connections.values()]) ws.end(CLOSE_CODES.GOING_AWAY, 'gateway shutting down');
    const left = await this.forwarder.flush(5_000);
    this.forwarder.close();
    // Said once, by whom each is now delivered; the callback role of this process reports at its stop what it could not.
    if (left.here > 0) this.ctx.log.info({ events: left.here }, 'gateway stopping: events not yet delivered are left with the callback role of this process, which stops next');
    if (left.elsewhere > 0) this.ctx.log.warn({ events: left.elsewhere }, 'gateway stopping: events whose app does not answer are left with the callback replicas that took them, which go on trying (lost if such a replica ends before it delivers them)');
    if (left.untaken > 0) this.ctx.log.warn({ events: left.untaken }, 'gateway stopping: events no callback replica took are lost');
    for (const s of this.subs) s.unsubscribe();
    this.connections.unsubscribeAll();
  }

  private upgrade(res: uWS.HttpResponse, req: uWS.HttpRequest, context: uWS.us_socket_context_t): void {
    // Everything needed is copied out of `req` now: it is gone after this call.
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = v;
    });
    const recover = req.getQuery('recover');
    // Refused upgrades get the edge's usual error envelope; no connection is opened.
    const fail = (err: unknown) => {
      const e = asPierError(err);
      this.metrics.refused.inc({ status: String(e.status) });
      void send(res, errorReply(e), { aborted: false });
    };
    if (this.stopping) return fail(new PierError('UNAVAILABLE', 'gateway shutting down'));
    if (this.fenced()) return fail(new PierError('UNAVAILABLE', 'this gateway is reconnecting to the cluster; try again'));
    let conn: Conn;
    try {
      conn = admit(this.ctx, headers, (user) => this.connections.liveOf(user), recover);
      // A recovering client is held to its user's replay budget, charged before the work (gateway-recovery.ts).
      this.recoveries.reserve(conn);
    } catch (err) {
      return fail(err);
    }
    // A browser's traceparent is a hint (docs/operations.md "Tracing"); the upgrade's span ends here.
    const span = activeTracer().incoming('ws upgrade', 'server', { traceparent: headers.traceparent, tracestate: headers.tracestate }, 'hint', { 'pier.app': appId(conn.user, conn.app) });
    if (span) {
      conn.trace = span.context;
      span.end();
    }
    res.upgrade(conn, headers['sec-websocket-key'] ?? '', headers['sec-websocket-protocol'] ?? '', headers['sec-websocket-extensions'] ?? '', context);
  }

  /** Hands one event to the forwarder; answers whether the connection's unsettled events are over their bound. */
  private event(c: Conn, action: GatewayAction, data: unknown, cookie: string | null, size = 0): boolean {
    c.seq++;
    // With export on, each message is a span of its own, linked to the connection's upgrade (no span
    // lives as long as a connection); otherwise the upgrade's traceparent, handed on as it came.
    const span = action === 'message' && this.tracer().exporting ? this.tracer().incoming('ws message', 'consumer', undefined, 'hint', { 'pier.app': appId(c.user, c.app) }, c.trace ? [c.trace] : undefined) : null;
    span?.end();
    const trace = (span?.context ?? c.trace)?.traceparent;
    const ev = { eventId: gatewayEventId(c.connId, c.seq, action), connId: c.connId, edge: this.ctx.peers.self.busId, user: c.user, app: c.app, seq: c.seq, oldest: c.seq, action, data, cookie };
    return this.forwarder.emit(trace ? { ...ev, trace } : ev, size);
  }

  private readonly tracer = activeTracer;

  private opened(ws: Ws): void {
    const c = ws.getUserData();
    c.open = true;
    const key = appId(c.user, c.app);
    // The first connection of the chain here: its order starts at the head, or where its replay ends (order.ts track).
    if (this.connections.add(ws, () => serve(this.ctx.bus, at(gatewayChannels.command, gatewaySubjects.user(c.user, c.app)), (cmd) => this.delivery.command(cmd)))) this.delivery.order?.track(key, c.recover !== undefined);
    this.metrics.connections.set(this.connections.size);
    // A connection that asked for recovery is told its replay first; its open callback says how it went.
    if (c.recover) void this.recoveries.recover(ws, c);
    else this.event(c, 'open', {}, null);
  }

  /**
   * An edge the cluster may have declared dead (it did not hear itself for nearly the death bound:
   * paused, starved, cut off) ends every connection before it acts on anything that came in
   * meanwhile: the callback replicas may have raised their closes already, and a frame forwarded
   * now would reach the app after that close (a chaos run: an edge paused 3 s, its connection's
   * close raised at 2 s, eight messages delivered after it). Each connection's own close goes out
   * too, under the same id `<conn_id>:close`: an app that deduplicates sees one. Clients reconnect.
   */
  private fenced(): boolean {
    // On the in-process bus nobody else can declare this edge dead: a stall there fences nothing.
    // A replica asks this edge before it raises its closes, and waits for the answer up to the death
    // bound again (actors/callback/edge-probe.ts): while the NATS connection stood, that much more.
    if (this.ctx.bus.kind === 'memory' || !this.ctx.peers.mayBeDeclaredDead(this.ctx.config.peerDeadMs)) return false;
    if (this.connections.size > 0) {
      this.ctx.log.warn({ connections: this.connections.size }, 'gateway: this edge did not hear itself for nearly the death bound; ending its connections (the cluster may have closed them)');
      for (const ws of this.connections.values()) ws.getUserData().fenced = true;
      this.connections.closeWhere(() => true, CLOSE_CODES.LOST, 'the gateway lost the cluster for a while; reconnect');
    }
    return true;
  }

  private received(ws: Ws, message: ArrayBuffer, isBinary: boolean): void {
    if (this.fenced()) return;
    const c = ws.getUserData();
    c.lastSeen = Date.now();
    this.metrics.messagesIn.inc();
    if (message.byteLength > this.ctx.config.gateway.maxFrameBytes) {
      ws.end(CLOSE_CODES.TOO_BIG, `frame over ${this.ctx.config.gateway.maxFrameBytes} bytes`);
      return;
    }
    const { data, ping } = frameToData(message, isBinary);
    if (ping) {
      if (this.delivery.send(ws, PONG)) this.metrics.messagesOut.inc();
      return;
    }
    // While its replay is read (its open callback not sent yet), a recovering connection's frames
    // wait, bounded as events are: by count and by bytes.
    if (c.recover?.replaying) {
      const size = message.byteLength + c.cookie.length;
      c.recover.inbound.push({ data, cookie: c.cookie || null, size });
      c.recover.inboundBytes += size;
      const g = this.ctx.config.gateway;
      if (c.recover.inbound.length > g.maxPendingEvents || c.recover.inboundBytes > g.maxPendingBytes) ws.end(CLOSE_CODES.BACKLOG, 'too many events waiting for the app');
      return;
    }
    // Events waiting for a failing or slow app are bounded per connection: past it, 4009 (the close is still delivered).
    if (this.event(c, 'message', data, c.cookie || null, message.byteLength + c.cookie.length)) {
      ws.end(CLOSE_CODES.BACKLOG, 'too many events waiting for the app');
    }
  }

  private closed(ws: Ws, code: number): void {
    this.delivery.forget(ws);
    const c = ws.getUserData();
    c.open = false;
    if (this.connections.remove(ws)) this.delivery.order?.untrack(appId(c.user, c.app));
    this.metrics.connections.set(this.connections.size);
    this.metrics.closes.inc({ code: String(code) });
    // Closed before its replay was read: its open goes first, as for every connection, then its close.
    if (c.recover?.replaying) {
      c.recover.replaying = false;
      if (!c.silent) this.recoveries.openEvent(c, { recovered: false, offset: null, missed: 0, reason: 'unavailable' });
    }
    // The close says how many events it follows (open and messages): an app that got fewer knows
    // some were given up (docs/gateway.md "The exact loss window").
    if (!c.silent) this.event(c, 'close', closeData(c.fenced ? 'edgeLost' : c.seq), null);
  }
}

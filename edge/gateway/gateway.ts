import { at } from '../../bus/exchange.js';
import { activeTracer } from '../../bus/trace.js';
import { hear, serve } from '../../bus/verbs.js';
import uWS from 'uWebSockets.js';
import { Counter, Gauge } from 'prom-client';
import type { Subscription } from '../../bus/bus.js';
import { appId, gatewayEventId, parseAppId } from '../../bus/ids.js';
import { admit, type Conn } from './gateway-admission.js';
import { aliveSigned, CLOSE_CODES, closeData, gatewayChannels, gatewaySubjects, type ConnCommand, type ConnCommandResult, type GatewayAction, type ListedConn } from '../../bus/subjects.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { asPierError, PierError } from '../../bus/errors.js';
import { errorReply } from '../http/envelope.js';
import { send } from '../http/uws-response.js';
import { EventForwarder } from './gateway-forwarder.js';
import { frameToData } from './client-frame.js';
import { isolated } from '../http/isolate.js';
import { decrement, increment } from '../../lib/runtime/counts.js';
import type { GatewayHistory, Recovery } from './history/history.js';
import { LiveOrder } from './history/order.js';
import { ReplayBudget } from './history/replay-budget.js';
import { messageFrame, recoveryFrame } from './history/frames.js';

type Ws = uWS.WebSocket<Conn>;
/** Where browsers open their WebSocket (docs/protocol.md "Gateway"). */
export const GATEWAY_PATH = '/ws';
/** Exactly this text: the platform's browser library compares the frame to it as a string. */
const PONG = '{"event":"pong"}';

/**
 * The browser side of the WebSocket gateway on the public listener, and this edge's share of the
 * app-side commands. Connections are held here only; everything about them that other processes
 * need travels on the bus: events to the callback actor, commands by connection (this edge's
 * subject) or by user (a subject this edge subscribes to only while it holds that user's connections).
 */
/** What a message held for a replaying connection counts besides its text (its entry): 64 K empty ones fill 1 MiB. */
const HELD_OVERHEAD_BYTES = 16;

export class Gateway {
  private readonly conns = new Map<string, Ws>();
  /** Live connections per user on this edge (docs/protocol.md "Gateway": 429 past the cap). */
  private readonly perUser = new Map<string, number>();
  private readonly byUser = new Map<string, { sockets: Set<Ws>; sub: Subscription }>();
  private readonly subs: Subscription[] = [];
  private readonly forwarder: EventForwarder;
  private sweeper: NodeJS.Timeout | null = null;
  private stopUninstallWatch: (() => void) | null = null;
  private readonly metrics;
  private stopping = false;
  /** Kept messages in offset order on this edge (null: this edge keeps no history). */
  private readonly order: LiveOrder | null;
  private readonly replayBudget: ReplayBudget;

  constructor(
    private readonly ctx: RoleContext,
    private readonly history: GatewayHistory | null = null,
  ) {
    const registers = [ctx.metrics.registry];
    this.metrics = {
      connections: new Gauge({ name: 'pier_ws_connections', help: 'Open WebSocket connections on this edge', registers }),
      messagesIn: new Counter({ name: 'pier_ws_messages_in_total', help: 'Frames received from clients', registers }),
      messagesOut: new Counter({ name: 'pier_ws_messages_out_total', help: 'Frames sent to clients', registers }),
      closes: new Counter({ name: 'pier_ws_closes_total', help: 'Connections closed, by code', labelNames: ['code'], registers }),
      refused: new Counter({ name: 'pier_ws_upgrades_refused_total', help: 'Upgrades refused, by status', labelNames: ['status'], registers }),
      recoveries: new Counter({ name: 'pier_ws_recoveries_total', help: 'Connections that asked for recovery, by outcome (recovered, or why not)', labelNames: ['outcome'], registers }),
      gapsSkipped: new Counter({ name: 'pier_ws_history_gaps_skipped_total', help: 'Live messages a gateway could neither wait for nor read from history, so skipped in order', registers }),
    };
    this.replayBudget = new ReplayBudget(ctx.config.gateway.history.replayBytesPerMin);
    this.order = history
      ? new LiveOrder({
          head: async (id) => {
            const app = this.appOf(id);
            return app ? history.head(app).catch(() => null) : null;
          },
          fill: async (id, after, until) => {
            const app = this.appOf(id);
            if (!app) return null;
            return (await history.entriesAfter(app, after, 1_000)).filter((e) => e.seq < until);
          },
          deliverText: (id, seq, text) => this.sendToChain(id, text, seq),
          onSkip: (id, from, to) => {
            this.metrics.gapsSkipped.inc();
            // A connection that asked for recovery is owed every message: it reconnects (4005) and
            // its replay, read when the history answers again, gives it what it missed here.
            const recovering = [...(this.byUser.get(id)?.sockets ?? [])].filter((ws) => ws.getUserData().recover && ws.getUserData().open);
            for (const ws of recovering) ws.end(CLOSE_CODES.MISSED, 'a message could not be delivered in order; reconnect to recover it');
            ctx.log.warn({ app: id, from, to, reconnecting: recovering.length }, 'gateway history: a gap in live messages could not be read; delivering on, connections that asked for recovery reconnect');
          },
        })
      : null;
    const g = ctx.config.gateway;
    this.forwarder = new EventForwarder(ctx.bus, ctx.peers, { giveUpMs: g.callbackRetryMs, ackTimeoutMs: 5_000, maxEvents: g.maxPendingEvents, maxBytes: g.maxPendingBytes }, ctx.log, (connId) => {
      const ws = this.conns.get(connId);
      if (!ws) return;
      ws.getUserData().silent = true;
      ws.end(CLOSE_CODES.LOST, 'connection lost by the gateway cluster');
    }, (connId) => {
      // Its frames after the gap would reach the app as if nothing were missing: ended, and its
      // close (which says how many events it follows) tells the app what it did not get.
      this.conns.get(connId)?.end(CLOSE_CODES.UNDELIVERABLE, 'events could not be delivered to the app; reconnect');
    });
  }

  count(): number {
    return this.conns.size;
  }

  private appOf(id: string) {
    const parsed = parseAppId(id);
    return parsed ? this.ctx.cache.app(parsed.user, parsed.app) : undefined;
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
      serve(bus, at(gatewayChannels.command, gatewaySubjects.edge(peers.self.busId)), (cmd) => this.command(cmd)),
      hear(bus, at(gatewayChannels.settled, gatewaySubjects.settled(peers.self.busId)), ({ connId, seq }) => this.forwarder.settled(connId, seq)),
      // A callback replica that stopped hearing this edge asks before it raises its connections' closes.
      serve(bus, at(gatewayChannels.alive, gatewaySubjects.alive(peers.self.busId)), ({ nonce }) => ({ busId: peers.self.busId, sig: peers.sign(aliveSigned(peers.self.busId, nonce)) })),
      serve(bus, at(gatewayChannels.list, gatewaySubjects.list), ({ appId: wanted }) => {
        const conns: ListedConn[] = [];
        for (const ws of this.conns.values()) {
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
        this.closeWhere((d) => appId(d.user, d.app) === c.key, CLOSE_CODES.APP_UNINSTALLED, 'app uninstalled');
        // Its history goes with it (a reinstall starts another chain in any case).
        const gone = parseAppId(c.key);
        if (gone && this.history) void this.history.drop(gone.user, gone.app).catch(() => undefined);
      }
      if (c.kind === 'token' && c.op === 'delete') this.closeWhere((d) => d.tokenDigest === c.key, CLOSE_CODES.REVOKED, 'token revoked');
    });
    const idleMs = this.ctx.config.gateway.idleMs;
    // One pass over every connection a tick (100,000 of them on a big edge): idle ones, and those
    // of a token revoked with a full reload of the registry (no change event), are ended after it.
    this.sweeper = setInterval(() => {
      if (this.fenced()) return;
      const now = Date.now();
      this.endWhere((d) => (now - d.lastSeen > idleMs ? [CLOSE_CODES.IDLE, 'idle timeout'] : cache.tokenRevoked(d.tokenDigest) ? [CLOSE_CODES.REVOKED, 'token revoked'] : null));
    }, Math.max(50, Math.min(1_000, Math.floor(idleMs / 4))));
  }

  private closeWhere(match: (c: Conn) => boolean, code: number, reason: string): void {
    this.endWhere((c) => (match(c) ? [code, reason] : null));
  }

  /** Ends the connections `verdict` names a close for, in one pass (collected first: ending one changes the map). */
  private endWhere(verdict: (c: Conn) => readonly [number, string] | null): void {
    const ending: Array<[Ws, readonly [number, string]]> = [];
    for (const ws of this.conns.values()) {
      const v = verdict(ws.getUserData());
      if (v) ending.push([ws, v]);
    }
    for (const [ws, [code, reason]] of ending) ws.end(code, reason);
  }

  /** Going away: every connection closed (1001), and their close events handed over. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.stopUninstallWatch?.();
    for (const ws of [...this.conns.values()]) ws.end(CLOSE_CODES.GOING_AWAY, 'gateway shutting down');
    const left = await this.forwarder.flush(5_000);
    this.forwarder.close();
    // Said once, by whom each is now delivered; the callback role of this process reports at its stop what it could not.
    if (left.here > 0) this.ctx.log.info({ events: left.here }, 'gateway stopping: events not yet delivered are left with the callback role of this process, which stops next');
    if (left.elsewhere > 0) this.ctx.log.warn({ events: left.elsewhere }, 'gateway stopping: events whose app does not answer are left with the callback replicas that took them, which go on trying (lost if such a replica ends before it delivers them)');
    if (left.untaken > 0) this.ctx.log.warn({ events: left.untaken }, 'gateway stopping: events no callback replica took are lost');
    for (const s of this.subs) s.unsubscribe();
    for (const u of this.byUser.values()) u.sub.unsubscribe();
    await this.history?.close().catch(() => undefined);
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
      conn = admit(this.ctx, headers, (user) => this.perUser.get(user) ?? 0, recover);
    } catch (err) {
      return fail(err);
    }
    // A client recovering again and again is held to its user's budget (docs/protocol.md "History and
    // recovery"), whatever it asks (a malformed or hopeless position still costs reads): charged a
    // fixed cost now, before the work, and what it read once it is read.
    if (conn.recover) {
      const budget = this.replayBudget.allows(conn.user);
      if (!budget.ok) return fail(new PierError('RATE_LIMITED', `user "${conn.user}" replayed too much history lately; reconnect in ${budget.retryAfterS} s`));
      // The most it may read is taken now (what it did not read is given back once it is read): a
      // burst of recoveries cannot all pass before the first is charged.
      const app = this.ctx.cache.app(conn.user, conn.app);
      conn.recover.reserved = (app && this.history?.boundsOf(app)?.bytes) || 0;
      this.replayBudget.chargeUpgrade(conn.user);
      this.replayBudget.charge(conn.user, conn.recover.reserved);
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
    this.conns.set(c.connId, ws);
    const key = appId(c.user, c.app);
    let entry = this.byUser.get(key);
    if (!entry) {
      entry = { sockets: new Set(), sub: serve(this.ctx.bus, at(gatewayChannels.command, gatewaySubjects.user(c.user, c.app)), (cmd) => this.command(cmd)) };
      this.byUser.set(key, entry);
      this.order?.track(key);
    }
    entry.sockets.add(ws);
    increment(this.perUser, c.user);
    this.metrics.connections.set(this.conns.size);
    // A connection that asked for recovery is told its replay first; its open callback says how it went.
    if (c.recover) void this.recover(ws, c);
    else this.event(c, 'open', {}, null);
  }

  /**
   * The replay of a connection that asked (docs/protocol.md "History and recovery"): the recovery
   * frame, what it missed, then what came live meanwhile (held, never sent twice: an offset at or
   * below the connection's position is not sent again); then its open callback, and the frames it
   * sent while this was read.
   */
  private async recover(ws: Ws, c: Conn): Promise<void> {
    const r = c.recover!;
    const app = this.ctx.cache.app(c.user, c.app);
    const off: Recovery = { recovered: false, epoch: null, offset: null, missed: 0, reason: 'off', replay: [], bytes: 0, read: 0 };
    const result = this.history && app ? await this.history.recover(app, r.since).catch((): Recovery => ({ ...off, reason: 'unavailable' })) : off;
    // What it read is charged whatever comes next (a browser gone meanwhile read as much): the
    // reservation taken at the upgrade is settled against it.
    this.replayBudget.settle(c.user, r.reserved, result.read);
    r.reserved = 0;
    // Closed meanwhile: closed() has sent the open and the close.
    if (!r.replaying) return;
    r.replaying = false;
    this.metrics.recoveries.inc({ outcome: result.recovered ? 'recovered' : result.reason! });
    r.position = result.offset ?? 0;
    const held = r.held;
    r.held = [];
    r.heldBytes = 0;
    ws.cork(() => {
      if (!this.send(ws, recoveryFrame(result))) return;
      for (const m of result.replay) if (!this.send(ws, messageFrame(m.text, m.seq))) return;
      // A held message the replay already sent is skipped (deliverTo answers false), not the end of the held ones.
      for (const h of held) if (!this.deliverTo(ws, h.text, h.seq) && !c.open) return;
    });
    this.openEvent(c, result);
  }

  /** The open callback of a connection that asked for recovery, then the frames it sent meanwhile. */
  private openEvent(c: Conn, result: Pick<Recovery, 'recovered' | 'offset' | 'missed' | 'reason'>): void {
    const r = c.recover!;
    const since = typeof r.since === 'object' && r.since !== null ? r.since.offset : null;
    this.event(c, 'open', { recovery: { recovered: result.recovered, since, offset: result.offset, missed: result.missed, ...(result.reason ? { reason: result.reason } : {}) } }, null);
    const inbound = r.inbound;
    r.inbound = [];
    r.inboundBytes = 0;
    for (const m of inbound) {
      if (this.event(c, 'message', m.data, m.cookie, m.size) && c.open) {
        this.conns.get(c.connId)?.end(CLOSE_CODES.BACKLOG, 'too many events waiting for the app');
        return;
      }
    }
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
    if (this.conns.size > 0) {
      this.ctx.log.warn({ connections: this.conns.size }, 'gateway: this edge did not hear itself for nearly the death bound; ending its connections (the cluster may have closed them)');
      for (const ws of this.conns.values()) ws.getUserData().fenced = true;
      this.closeWhere(() => true, CLOSE_CODES.LOST, 'the gateway lost the cluster for a while; reconnect');
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
      if (this.send(ws, PONG)) this.metrics.messagesOut.inc();
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
    const c = ws.getUserData();
    c.open = false;
    this.conns.delete(c.connId);
    const key = appId(c.user, c.app);
    const entry = this.byUser.get(key);
    if (entry) {
      entry.sockets.delete(ws);
      if (entry.sockets.size === 0) {
        entry.sub.unsubscribe();
        this.byUser.delete(key);
        this.order?.untrack(key);
      }
    }
    decrement(this.perUser, c.user);
    this.metrics.connections.set(this.conns.size);
    this.metrics.closes.inc({ code: String(code) });
    // Closed before its replay was read: its open goes first, as for every connection, then its close.
    if (c.recover?.replaying) {
      c.recover.replaying = false;
      if (!c.silent) this.openEvent(c, { recovered: false, offset: null, missed: 0, reason: 'unavailable' });
    }
    // The close says how many events it follows (open and messages): an app that got fewer knows
    // some were given up (docs/gateway.md "The exact loss window").
    if (!c.silent) this.event(c, 'close', closeData(c.fenced ? 'edgeLost' : c.seq), null);
  }

  /**
   * One text frame; a client that lets more than the outbound limit pile up is closed with 4008.
   * Outside uWS's own callbacks nothing is corked: callers cork (one write per socket).
   */
  private send(ws: Ws, text: string): boolean {
    if (!ws.getUserData().open) return false;
    ws.send(text, false);
    if (ws.getBufferedAmount() > this.ctx.config.gateway.outboundBufferBytes) {
      ws.end(CLOSE_CODES.SLOW_CONSUMER, 'slow consumer: outbound buffer full');
      return false;
    }
    return true;
  }

  /** A kept message to every connection of the chain on this edge, in its turn. */
  private sendToChain(id: string, text: string, seq: number): void {
    let count = 0;
    for (const ws of this.byUser.get(id)?.sockets ?? []) {
      let sent = false;
      ws.cork(() => {
        sent = this.deliverTo(ws, text, seq);
      });
      if (sent) count++;
    }
    this.metrics.messagesOut.inc(count);
  }

  /**
   * An app's message to one connection: its text as is (a connection that did not ask for recovery
   * sees exactly what it always did), or wrapped with its offset; held while the replay is read;
   * never an offset the connection has had.
   */
  private deliverTo(ws: Ws, text: string, seq: number | null): boolean {
    const r = ws.getUserData().recover;
    if (!r) return this.send(ws, text);
    if (seq !== null && seq <= r.position && !r.replaying) return false;
    if (r.replaying) {
      r.held.push({ text, seq });
      // Bytes as they will be sent (UTF-8), plus a floor a message: many tiny ones are bounded too.
      r.heldBytes += Buffer.byteLength(text) + HELD_OVERHEAD_BYTES;
      if (r.heldBytes > this.ctx.config.gateway.outboundBufferBytes) ws.end(CLOSE_CODES.SLOW_CONSUMER, 'slow consumer: outbound buffer full');
      return true;
    }
    if (seq !== null) r.position = seq;
    return this.send(ws, messageFrame(text, seq));
  }

  /** A send or close for connections this edge holds (by id, or all of the named users'). */
  private command(cmd: ConnCommand): ConnCommandResult {
    let count = 0;
    const targets = new Set<Ws>();
    for (const id of cmd.connIds ?? []) {
      const ws = this.conns.get(id);
      if (ws && appId(ws.getUserData().user, ws.getUserData().app) === cmd.appId) targets.add(ws);
    }
    // An app instance is one user's (`<user>/<app>`): "users" can only ever mean that user, never
    // another user's instance of the same app.
    const app = parseAppId(cmd.appId)?.app;
    for (const user of app === undefined ? [] : (cmd.users ?? [])) {
      if (appId(user, app!) !== cmd.appId) continue;
      for (const ws of this.byUser.get(cmd.appId)?.sockets ?? []) targets.add(ws);
    }
    if (cmd.op === 'send') {
      const text = cmd.text ?? 'null';
      const kept = cmd.kept;
      if (kept && this.order && (cmd.connIds ?? []).length === 0) {
        // In offset order on this edge: now, or once the message it follows is here.
        for (const ws of targets) if (ws.getUserData().open) count++;
        this.order.accept(cmd.appId, kept, () => this.sendToChain(cmd.appId, text, kept.seq), text.length);
        return { count };
      }
      for (const ws of targets) {
        let sent = false;
        ws.cork(() => {
          sent = this.deliverTo(ws, text, kept?.seq ?? null);
        });
        if (sent) count++;
      }
      this.metrics.messagesOut.inc(count);
    } else {
      for (const ws of targets) {
        if (!ws.getUserData().open) continue;
        ws.end(CLOSE_CODES.CLOSED_BY_APP, 'closed by the app');
        count++;
      }
    }
    return { count };
  }

}

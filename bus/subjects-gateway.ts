import { exchange } from './exchange.js';
import type { WireError } from './errors.js';

/**
 * The gateway's delivery rules (docs/protocol.md "Gateway"), in one place.
 *
 * - **Who delivers.** Every event of one connection (open, messages, close) goes to one callback
 *   replica, chosen by rendezvous hashing of the connection id over the live callback replicas
 *   (`edge/gateway/gateway-forwarder.ts`): every edge picks the same one, and a lost replica moves only its
 *   own connections.
 * - **What the edge keeps.** The edge holding the connection keeps each event until the replica
 *   says it is *settled* (`pier.gw.settled.<edge>`: delivered with a 2xx, or given up after the
 *   retry period). At most 1,000 events / 1 MiB per connection wait so; past that the connection is
 *   closed with 4009, and its close is still accepted and delivered.
 * - **Order.** A replica takes a connection's events strictly in `seq` order
 *   (`actors/callback/queues.ts`): a duplicate is acknowledged and ignored; a gap (an event lost on
 *   the way) is refused with the seq it expects, and the edge sends everything unsettled again, in
 *   order. A replica new to a connection starts at the edge's oldest unsettled event (`oldest`).
 *   The app sees open, then messages in order, then close, with each event's `X-Pier-Event-Id`.
 * - **Replica death.** When a callback replica dies (heartbeats stop) or does not acknowledge, the
 *   edge sends the unsettled events again, in order, to the next choice: nothing is lost; an event
 *   the dead replica had delivered but not yet settled is delivered twice (same event id).
 * - **Edge death.** The replica holding a dead edge's connections raises their close, after what
 *   is queued; a late event of a closed connection is refused (`closed: true`), and the edge then
 *   drops that connection's events.
 * - **Where callbacks go.** Not where the event says: an event names only the user and the app.
 *   The replica takes the app's target from its own registry view when it first sees the
 *   connection and keeps it for that connection (so a close after an uninstall still reaches the
 *   app); an event for an app its view does not know is refused (`ok: false`), and the edge sends
 *   it again later (the replica's view may lag the edge's) until the retry period ends.
 * - **The one loss window.** Events are held in the edge's memory, not in a stream: if the edge
 *   process dies, its unsettled events die with it (the close is still raised by the replica). An
 *   app that is down longer than the retry period loses the events given up on (counted in
 *   `pier_callbacks_dropped_total`).
 */

/** Callback actions (docs/protocol.md "Gateway"). */
export type GatewayAction = 'open' | 'message' | 'close';

/**
 * One gateway event, from the edge holding the connection to the callback replica that delivers
 * it. Events of one connection all go to one callback replica, in `seq` order.
 */
export interface GatewayEvent {
  eventId: string;
  connId: string;
  /** busId of the edge that holds the connection (it is also the prefix of `connId`). */
  edge: string;
  user: string;
  app: string;
  /** Per connection, from 1. */
  seq: number;
  /** The oldest event of this connection the edge still holds unsettled: where a replica new to the connection starts. */
  oldest: number;
  action: GatewayAction;
  data: unknown;
  /** The client's Cookie header, on `message` only. */
  cookie: string | null;
  /**
   * The event's W3C `traceparent` (docs/operations.md "Tracing"): a message's own span, or the
   * connection's upgrade. Absent from an edge older than the field, and when nothing is traced.
   */
  trace?: string;
}

/**
 * The callback replica's answer to an event: taken in charge (`closed` when it already raised that
 * connection's close), or refused (`ok: false`: the replica has no target for it, see above).
 */
export type EventAck =
  | {
      ok: true;
      closed: boolean;
      /** A gap: this event was not taken, the replica expects `expected` first (the edge sends again from there). */
      expected?: number;
    }
  | { ok: false; error: WireError };

/** A send or close aimed at connections, by id or by user; each edge answers for its own. */
export interface ConnCommand {
  op: 'send' | 'close';
  /** `<user>/<app>`: an edge acts only on that app's connections. */
  appId: string;
  connIds?: string[];
  users?: string[];
  /** JSON text to send as one text frame (op `send`). */
  text?: string;
  /**
   * Where the message was kept in the user's history (docs/gateway.md "History and recovery"): an
   * edge delivers it after the one it follows (`prev`), and wraps it with its offset for connections
   * that asked for recovery. A release before 0.3 ignores it (and delivers as it always did).
   */
  kept?: { epoch: string; seq: number; prev: number };
}

export interface ConnCommandResult {
  count: number;
}

export interface ListedConn {
  user: string;
  id: string;
  userAgent: string;
}

/** Pier's WebSocket close codes (4000-4099 are Pier's). */
/**
 * What a close callback's `data` says (docs/gateway.md "Callbacks to the app"): `events`, how many
 * events of the connection came before it (its open and messages, X-Pier-Seq 1..events), so an app
 * that got fewer knows some were given up; or `edgeLost`, when the connection's edge was lost (it
 * died, or stalled and fenced itself) and the close was raised without it: what the browser sent
 * that edge last may be lost, and nothing says how much. The cluster's and the fenced edge's close
 * share an id and say the same, so an app that deduplicates sees one. (0.2 sent `{}`.)
 */
export type CloseData = { events: number } | { edgeLost: true };
export const closeData = (events: number | 'edgeLost'): CloseData => (events === 'edgeLost' ? { edgeLost: true } : { events });

export const CLOSE_CODES = {
  GOING_AWAY: 1001,
  TOO_BIG: 1009,
  /** Pier failed handling the connection (logged and counted); the process goes on. */
  INTERNAL: 1011,
  IDLE: 4000,
  CLOSED_BY_APP: 4001,
  APP_UNINSTALLED: 4002,
  /** The cluster lost this edge long enough to raise the connection's close without it. */
  LOST: 4003,
  /** The user's token was revoked. */
  REVOKED: 4004,
  /** A connection that asked for recovery missed a live message its edge could not read: it reconnects and recovers it. */
  MISSED: 4005,
  SLOW_CONSUMER: 4008,
  /** Too many events waiting for a failing or slow app (its close is still delivered). */
  BACKLOG: 4009,
  /** No callback replica took this connection's events for the whole retry period: they were dropped (its close says how many events it follows). */
  UNDELIVERABLE: 4010,
} as const;

/**
 * An edge's word that a connection's events now go to another callback replica. Signed by the edge
 * process (its heartbeat key), over `movedSigned`: edges share one bus identity, so a notice names
 * the process that holds the connection and proves it; the replica forgets only connections of
 * that edge, and only a notice made within the last `MOVED_FRESH_MS`.
 */
export interface MovedNotice {
  connId: string;
  /** The bus id of the edge that sends it (and holds the connection). */
  edge: string;
  at: number;
  sig: string;
}
export const movedSigned = (replica: string, n: Pick<MovedNotice, 'connId' | 'edge' | 'at'>) => Buffer.from(`pier moved|${replica}|${n.connId}|${n.edge}|${n.at}`);
export const MOVED_FRESH_MS = 30_000;
/** What an edge signs to say it runs: its bus id and the asking replica's nonce. */
export const aliveSigned = (edgeBusId: string, nonce: string) => Buffer.from(`pier alive|${edgeBusId}|${nonce}`);

/** Subjects of the gateway. Per-connection and per-user subjects carry interest: only holders subscribe. */
export const gatewaySubjects = {
  /** Commands for connections held by one edge. */
  edge: (edgeBusId: string) => `pier.gw.edge.${edgeBusId}`,
  /** Commands for one user's connections to one app; subscribed only by edges holding some. */
  user: (user: string, app: string) => `pier.gw.user.${user}.${app}`,
  /** Scatter-gather to every edge: the connections of one app (request `{appId}` → ListedConn[]). */
  list: 'pier.gw.list',
  /** Events for one callback replica. */
  deliver: (callbackBusId: string) => `pier.cb.deliver.${callbackBusId}`,
  hello: (callbackBusId: string) => `pier.cb.hello.${callbackBusId}`,
  /** From an edge to a callback replica it stopped sending a connection's events to (in order with them). */
  moved: (callbackBusId: string) => `pier.cb.moved.${callbackBusId}`,
  /** From callback replicas to the edge holding a connection: events up to `seq` are done with ({connId, seq}). */
  settled: (edgeBusId: string) => `pier.gw.settled.${edgeBusId}`,
  /**
   * An edge answers here that it runs: a callback replica asks before it raises the closes of an
   * edge gone silent (a starved edge is not a dead one). 0.2 edges do not serve it: no responders.
   */
  alive: (edgeBusId: string) => `pier.gw.alive.${edgeBusId}`,
};

const id = { type: 'string', min: 1, max: 128 } as const;

/** The gateway's traffic on run-time subjects (`gatewaySubjects`), schema-checked on both sides. */
export const gatewayChannels = {
  /** A send or close, to one edge (by connection) or to the edges holding a user's connections. */
  command: exchange<ConnCommand, ConnCommandResult>({
    request: {
      op: { type: 'enum', values: ['send', 'close'] },
      appId: { type: 'string', max: 64 },
      connIds: { type: 'array', optional: true, max: 10_000, items: { type: 'string', max: 64 } },
      users: { type: 'array', optional: true, max: 10_000, items: { type: 'string', max: 64 } },
      text: { type: 'string', optional: true, max: 16 * 1024 * 1024 },
      kept: {
        type: 'object',
        optional: true,
        props: { epoch: { type: 'string', max: 64 }, seq: { type: 'number', integer: true, min: 1 }, prev: { type: 'number', integer: true, min: 0 } },
      },
    },
    reply: { count: { type: 'number', integer: true, min: 0 } },
    timeoutMs: 2_000,
    // In one process the command is shared: built per call, only read by the gateway.
    shared: true,
  }),
  /** Scatter-gather to every edge: one app's connections. */
  list: exchange<{ appId: string }, { conns: ListedConn[] }>({
    request: { appId: { type: 'string', max: 64 } },
    reply: { conns: { type: 'array', max: 1_000_000, items: { type: 'object', props: { user: 'string', id: 'string', userAgent: 'string' } } } },
    timeoutMs: 2_000,
  }),
  /**
   * The callback replica `busId` is there and answers (the edge uses a replica only once it has).
   * Strict, the one exception to readers tolerating what they do not know: a hello carries
   * nothing, so one with content is not a hello, and is refused (what a later release would add
   * goes in a new exchange, not here).
   */
  hello: exchange<Record<string, never>, { busId: string }>({ request: { $$strict: true }, reply: { busId: id }, timeoutMs: 2_000 }),
  /**
   * The edge still runs (asked by a callback replica before it raises the edge's closes): it signs
   * the replica's nonce with its heartbeat key (`aliveSigned`), so nobody else can answer for it.
   */
  alive: exchange<{ nonce: string }, { busId: string; sig: string }>({
    request: { $$strict: true, nonce: { type: 'string', min: 16, max: 64 } },
    reply: { busId: id, sig: { type: 'string', max: 128 } },
    timeoutMs: 5_000,
  }),
  /** One event, to the callback replica that delivers the connection's events. */
  deliver: exchange<GatewayEvent, EventAck>({
    request: {
      eventId: id,
      connId: id,
      edge: id,
      user: { type: 'string', max: 64 },
      app: { type: 'string', max: 64 },
      seq: { type: 'number', integer: true, min: 1 },
      oldest: { type: 'number', integer: true, min: 1 },
      action: { type: 'enum', values: ['open', 'message', 'close'] },
      data: { type: 'any', optional: true },
      cookie: { type: 'string', nullable: true, optional: true, max: 64 * 1024 },
      trace: { type: 'string', optional: true, max: 256 },
    },
    reply: {
      // Either shape of EventAck, each whole.
      $$root: true,
      type: 'multi',
      rules: [
        { type: 'object', props: { ok: { type: 'equal', value: true }, closed: 'boolean', expected: { type: 'number', integer: true, min: 1, optional: true } } },
        { type: 'object', props: { ok: { type: 'equal', value: false }, error: { type: 'object', props: { code: { type: 'string', max: 64 }, message: { type: 'string', max: 1024 } } } } },
      ],
    },
    timeoutMs: 5_000,
    // The browser's cookie (the platform's session among them) is sealed to the callback role's
    // anchored key: only a real callback replica opens it, not one a stolen identity started.
    seal: { request: 'callback' },
    // In one process the event is shared: the edge keeps it unchanged until settled, the replica queues it unchanged.
    shared: true,
  }),
  /**
   * From the edge to the callback replica it stopped sending a connection's events to (it was
   * paused, cut off, or left): sent on that replica's own subject after the events it had, so the
   * replica reads it before anything of the connection that may come back to it later.
   */
  moved: exchange<MovedNotice>({ request: { connId: id, edge: id, at: { type: 'number', integer: true, min: 0 }, sig: { type: 'string', max: 128 } }, oneWay: true }),
  /** From a callback replica to the edge holding a connection: its events up to `seq` are done with. */
  settled: exchange<{ connId: string; seq: number }>({ request: { connId: id, seq: { type: 'number', integer: true, min: 0 } }, oneWay: true }),
};


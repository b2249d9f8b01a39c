import { channel, signal } from './channel.js';
import type { WebsocketOptions } from './subjects-registry.js';

/** Callback actions (CONTRACT.md section 6). */
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
  action: GatewayAction;
  data: unknown;
  /** The client's Cookie header, on `message` only. */
  cookie: string | null;
  /** Where the app listens, captured at open: close is delivered even after an uninstall. */
  target: WebsocketOptions & { host: string };
}

/** The callback replica's answer to an event: taken in charge (`closed` when it already raised that connection's close). */
export interface EventAck {
  ok: true;
  closed: boolean;
}

/** A send or close aimed at connections, by id or by user; each edge answers for its own. */
export interface ConnCommand {
  op: 'send' | 'close';
  /** `<user>/<app>`: an edge acts only on that app's connections. */
  appId: string;
  connIds?: string[];
  users?: string[];
  /** JSON text to send as one text frame (op `send`). */
  text?: string;
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
  SLOW_CONSUMER: 4008,
  /** Too many events waiting for a failing or slow app (its close is still delivered). */
  BACKLOG: 4009,
} as const;

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
  /** From callback replicas to the edge holding a connection: events up to `seq` are done with ({connId, seq}). */
  settled: (edgeBusId: string) => `pier.gw.settled.${edgeBusId}`,
};

const id = { type: 'string', min: 1, max: 128 } as const;

/** The gateway's traffic on run-time subjects (`gatewaySubjects`), schema-checked on both sides. */
export const gatewayChannels = {
  /** A send or close, to one edge (by connection) or to the edges holding a user's connections. */
  command: channel<ConnCommand, ConnCommandResult>(
    {
      op: { type: 'enum', values: ['send', 'close'] },
      appId: { type: 'string', max: 64 },
      connIds: { type: 'array', optional: true, max: 10_000, items: { type: 'string', max: 64 } },
      users: { type: 'array', optional: true, max: 10_000, items: { type: 'string', max: 64 } },
      text: { type: 'string', optional: true, max: 16 * 1024 * 1024 },
    },
    { count: { type: 'number', integer: true, min: 0 } },
  ),
  /** Scatter-gather to every edge: one app's connections. */
  list: channel<{ appId: string }, { conns: ListedConn[] }>(
    { appId: { type: 'string', max: 64 } },
    { conns: { type: 'array', max: 1_000_000, items: { type: 'object', props: { user: 'string', id: 'string', userAgent: 'string' } } } },
  ),
  /** One event, to the callback replica that delivers the connection's events. */
  deliver: channel<GatewayEvent, EventAck>(
    {
      eventId: id,
      connId: id,
      edge: id,
      user: { type: 'string', max: 64 },
      app: { type: 'string', max: 64 },
      seq: { type: 'number', integer: true, min: 1 },
      action: { type: 'enum', values: ['open', 'message', 'close'] },
      data: { type: 'any', optional: true },
      cookie: { type: 'string', nullable: true, optional: true, max: 64 * 1024 },
      target: { type: 'object', props: { url: { type: 'string', max: 512 }, port: { type: 'number', integer: true, min: 1, max: 65535 }, host: { type: 'string', max: 253 } } },
    },
    { ok: { type: 'equal', value: true }, closed: 'boolean' },
    5_000,
  ),
  /** From a callback replica to the edge holding a connection: its events up to `seq` are done with. */
  settled: signal<{ connId: string; seq: number }>({ connId: id, seq: { type: 'number', integer: true, min: 0 } }),
};

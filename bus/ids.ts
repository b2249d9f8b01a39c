import { randomBytes } from 'node:crypto';

/**
 * The ids with a structure, one helper each (ARCHITECTURE.md: "ids with a structure have one typed
 * helper each"): nothing else builds or splits them.
 */

/** An installed app's id: `<user>/<app>` (user and app names never hold a `/`). */
export type AppId = string;

export function appId(user: string, app: string): AppId {
  return `${user}/${app}`;
}

/** `<user>/<app>` → its parts; undefined when it is not of that form. */
export function parseAppId(id: string): { user: string; app: string } | undefined {
  const slash = id.indexOf('/');
  if (slash <= 0 || slash === id.length - 1 || id.indexOf('/', slash + 1) !== -1) return undefined;
  return { user: id.slice(0, slash), app: id.slice(slash + 1) };
}

/**
 * A WebSocket connection's id: `<bus id of the edge holding it>.<128 random bits>`. Unique across
 * the cluster and unguessable; the prefix routes commands to the holder (docs/protocol.md "Gateway").
 */
export const CONN_ID = /^[0-9a-f]{12}\.[A-Za-z0-9_-]{22}$/;

export function newConnId(edgeBusId: string): string {
  return `${edgeBusId}.${randomBytes(16).toString('base64url')}`;
}

/** The bus id of the edge holding a connection; undefined for a malformed id. */
export function edgeOfConn(connId: string): string | undefined {
  return CONN_ID.test(connId) ? connId.slice(0, connId.indexOf('.')) : undefined;
}

/**
 * A gateway event's X-Pier-Event-Id: `<conn_id>:<seq>`, and `<conn_id>:close` for the close, whoever
 * raises it (the edge, or a callback replica after the edge died): a replica that missed a
 * connection's move may hold an older seq, and its close must not take the id of a message another
 * replica delivered; two closes raised for one connection are one close to an app that deduplicates.
 */
export function gatewayEventId(connId: string, seq: number, action: string): string {
  return action === 'close' ? `${connId}:close` : `${connId}:${seq}`;
}

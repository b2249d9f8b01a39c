import type { Readable } from 'node:stream';
import type { Logger } from '../../lib/runtime/log.js';
import type { Metrics } from '../../lib/runtime/metrics.js';
import type { BlockPool } from './block-pool.js';

// The vocabulary every listener shares: what a handler reads, what it answers, how a route is
// declared. Plain data, no uWS: handlers are tested with these alone, never with a socket.

/** Everything a handler may read, copied out of uWS's request before any await (uWS frees it). */
export interface HttpRequestData {
  method: string;
  path: string;
  query: URLSearchParams;
  /** The query string exactly as sent (without `?`), for passing through untouched. */
  rawQuery: string;
  headers: Record<string, string>;
  params: Record<string, string>;
  remoteAddress: string;
  body: Buffer;
  /** The body as a stream (routes with `streamBody`), read with backpressure on the client. */
  stream?: Readable;
}

/** A request before its body: what a gate may look at. */
export type RequestHead = Omit<HttpRequestData, 'body' | 'stream'>;

export interface HttpReply {
  status: number;
  /** Serialised as JSON with `content-type: application/json`. */
  json?: unknown;
  text?: string;
  /** Raw bytes, sent as they are. */
  body?: Uint8Array;
  /** A body written piece by piece, each piece only once the client has taken the previous one. */
  stream?: AsyncIterable<Uint8Array>;
  headers?: Record<string, string>;
}

/** `any` routes take every method (no 405). */
export type Method = 'get' | 'head' | 'post' | 'put' | 'patch' | 'del' | 'options' | 'any';

export interface Route {
  method: Method;
  /** uWS pattern, `:name` for a parameter. */
  path: string;
  handler: (req: HttpRequestData) => Promise<HttpReply> | HttpReply;
  /** Largest body accepted, in bytes (0 = no body read). */
  bodyLimit?: number;
  /** Hand the body over as a stream instead of reading it whole (uploads). */
  streamBody?: boolean;
  /** With `streamBody`: copy the body's chunks into this pool's blocks; the handler gives each back once nobody reads it. */
  bodyPool?: BlockPool;
  /**
   * Checks that need no body, run before any of it is read (the socket is paused meanwhile): a
   * reply (or a throw) is answered at once and the body is discarded unread; null lets it through.
   */
  gate?: (req: RequestHead) => Promise<HttpReply | null>;
  /**
   * Whether `gate` would pass this request at once (a pass it remembers), asked synchronously: then
   * the gate is not run and nothing waits for it. It must say true only where the gate would answer
   * null without asking anything or changing anything but that memory.
   */
  gatePassed?: (req: RequestHead) => boolean;
  /**
   * The gate checks who is calling (an app's access token, its key and secret, the operator's token).
   * Only such a route's caller is followed for trace sampling, once the gate has passed: the request's
   * span starts then, dated from the request's arrival. Any other request on a listener for apps and
   * the operator is anonymous to tracing (bus/trace.ts `ParentTrust`; docs/operations.md "Tracing").
   */
  gateChecksCaller?: boolean;
}

/** What mounting a listener's routes needs besides the routes: where to log and count. */
export interface HttpDeps {
  listener: string;
  log: Logger;
  metrics: Metrics;
  /** Whether the listener answers a request with this `Host` (the admin listener's: edge/identity/host.ts); absent: any. */
  hostAllowed?: (host: string | undefined) => boolean;
  /**
   * The listener's process is stopping (an edge's drain): every answer from now on closes its
   * connection after it (`Connection: close`), so a client's next request opens a new connection,
   * which the balancer sends to another edge, instead of reusing one bound to this one.
   */
  closing?: () => boolean;
  /** Requests being answered now, counted while the listener lives (a stop waits for them). */
  inFlight?: { count: number };
}

/** A query with no escape (no `%`, no `+`, printable ASCII) and no leading `?` of its own. */
const PLAIN_QUERY = /^(?!\?)[!-$&-*,-~]*$/;

/**
 * `req.query.get(name)` — the first value of `name`, decoded, or null — without parsing the whole
 * query when it has no escape (a vault call's `workspace=chat`): then each `&`-separated
 * part reads as it is written, and the first part named `name` is the answer. Anything else is
 * asked of `req.query` (URLSearchParams), which answered it before.
 */
export function queryParam(req: Pick<RequestHead, 'rawQuery' | 'query'>, name: string): string | null {
  const raw = req.rawQuery;
  if (!PLAIN_QUERY.test(raw)) return req.query.get(name);
  for (let start = 0; start < raw.length; ) {
    let end = raw.indexOf('&', start);
    if (end < 0) end = raw.length;
    const eq = raw.indexOf('=', start);
    const nameEnd = eq >= 0 && eq < end ? eq : end;
    // An empty part names nothing (URLSearchParams skips it).
    if (end > start && nameEnd - start === name.length && raw.startsWith(name, start)) return nameEnd === end ? '' : raw.slice(nameEnd + 1, end);
    start = end + 1;
  }
  return null;
}

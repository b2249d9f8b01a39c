import { STATUS_CODES } from 'node:http';
import { Readable } from 'node:stream';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { asPierError, PierError } from '../bus/errors.js';
import type { Logger } from '../lib/log.js';
import type { Metrics } from '../lib/metrics.js';
import { isolated } from './isolate.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-depth.js';

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
export type Method = 'get' | 'post' | 'put' | 'patch' | 'del' | 'options' | 'any';

export interface Route {
  method: Method;
  /** uWS pattern, `:name` for a parameter. */
  path: string;
  handler: (req: HttpRequestData) => Promise<HttpReply> | HttpReply;
  /** Largest body accepted, in bytes (0 = no body read). */
  bodyLimit?: number;
  /** Hand the body over as a stream instead of reading it whole (uploads). */
  streamBody?: boolean;
  /**
   * Checks that need no body, run before any of it is read (the socket is paused meanwhile): a
   * reply (or a throw) is answered at once and the body is discarded unread; null lets it through.
   */
  gate?: (req: RequestHead) => Promise<HttpReply | null>;
}

/** A gate's refusal: answered as it is, the body never read. */
class GateRefusal extends Error {
  constructor(readonly reply: HttpReply) {
    super('refused before the body');
  }
}

export interface HttpDeps {
  listener: string;
  log: Logger;
  metrics: Metrics;
}

const statusLine = (status: number) => `${status} ${STATUS_CODES[status] ?? ''}`.trimEnd();

/** The success envelope (CONTRACT.md section 0). */
export function ok(data?: unknown, message = 'success'): HttpReply {
  return { status: 200, json: data === undefined ? { code: 0, message } : { code: 0, message, data } };
}

/** The error envelope: HTTP status and `code` are the same number. */
export function errorReply(err: PierError): HttpReply {
  const status = err.status;
  const json: Record<string, unknown> = { code: status, message: err.message };
  if (err.data !== undefined) json.data = err.data;
  return { status, json };
}

export function parseJsonBody(req: HttpRequestData): Record<string, unknown> {
  if (req.body.length === 0) throw new PierError('BAD_REQUEST', 'body: must be a JSON object');
  const text = req.body.toString('utf8');
  // Parsed, a structure this deep would overflow the stack of every recursive step after it.
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw new PierError('BAD_REQUEST', `body: JSON must not nest deeper than ${MAX_JSON_DEPTH} levels`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new PierError('BAD_REQUEST', 'body: is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new PierError('BAD_REQUEST', 'body: must be a JSON object');
  return value as Record<string, unknown>;
}

function copyRequest(res: HttpResponse, req: HttpRequest, paramNames: string[]): Omit<HttpRequestData, 'body'> {
  const headers: Record<string, string> = {};
  req.forEach((k, v) => {
    headers[k] = v;
  });
  const params: Record<string, string> = {};
  paramNames.forEach((name, i) => {
    const raw = req.getParameter(i);
    try {
      params[name] = decodeURIComponent(raw);
    } catch {
      params[name] = raw; // malformed %-escape: handlers validate the raw text
    }
  });
  return {
    method: req.getMethod(),
    path: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    rawQuery: req.getQuery() ?? '',
    headers,
    params,
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
  };
}

interface ResponseState {
  aborted: boolean;
  /** The response was ended: uWS forbids touching `res` after that (a late resume would throw). */
  finished?: boolean;
  /** Set by whoever waits on the request, to be told of an abort (uWS calls nothing else then). */
  onAbort?: () => void;
}

/**
 * Reads the whole body up to `limit` bytes; a larger body is refused before it is buffered. With a
 * `gate`, nothing past what the socket already delivered is read until the gate passes: the
 * socket is paused at the first chunk, resumed on a pass. On a refusal the socket is resumed too,
 * so uWS drains the rest of the body unread (discarded, never buffered) and the connection lives on.
 */
function readBody(res: HttpResponse, declared: string, limit: number, state: ResponseState, gate: Promise<unknown> | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = declared !== '' && Number(declared) > limit;
    if (done) reject(new PierError('PAYLOAD_TOO_LARGE', `body: must be at most ${limit} bytes`));
    let complete = false;
    let open = gate === null;
    let paused = false;
    const resume = () => {
      if (paused && !state.aborted && !state.finished) res.resume();
      paused = false;
    };
    const settle = () => {
      if (done || !complete || !open) return;
      done = true;
      resolve(Buffer.concat(chunks));
    };
    gate?.then(
      () => {
        open = true;
        resume();
        settle();
      },
      (err: unknown) => {
        if (done) return;
        done = true;
        chunks.length = 0;
        resume();
        reject(err);
      },
    );
    res.onData((chunk, isLast) => {
      if (done) return;
      size += chunk.byteLength;
      if (size > limit) {
        done = true;
        reject(new PierError('PAYLOAD_TOO_LARGE', `body: must be at most ${limit} bytes`));
        return;
      }
      chunks.push(Buffer.from(chunk.slice(0))); // uWS reuses the chunk's memory: copy it
      if (isLast) complete = true;
      else if (!open && !paused) {
        paused = true;
        res.pause();
      }
      settle();
    });
    // An aborted request never calls onData again: settle so nothing waits forever.
    state.onAbort = () => {
      if (done) return;
      done = true;
      reject(new PierError('BAD_REQUEST', 'request aborted'));
    };
  });
}

function writeHead(res: HttpResponse, reply: HttpReply): void {
  res.writeStatus(statusLine(reply.status));
  if (reply.json !== undefined) res.writeHeader('content-type', 'application/json');
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
}

/** Resolves when uWS can take more data for this response, or it was aborted. */
function writable(res: HttpResponse, state: ResponseState): Promise<void> {
  return new Promise((resolve) => {
    const previous = state.onAbort;
    state.onAbort = () => {
      previous?.();
      resolve();
    };
    res.onWritable(() => {
      resolve();
      return true;
    });
  });
}

async function sendStream(res: HttpResponse, reply: HttpReply, stream: AsyncIterable<Uint8Array>, state: ResponseState): Promise<void> {
  res.cork(() => writeHead(res, reply));
  const it = stream[Symbol.asyncIterator]();
  try {
    for (let r = await it.next(); !r.done; r = await it.next()) {
      if (state.aborted) return;
      let ok = true;
      res.cork(() => {
        ok = res.write(r.value);
      });
      if (!ok) await writable(res, state);
    }
    if (!state.aborted) res.cork(() => res.end());
  } catch {
    // The status is already sent: the only honest signal left is to cut the connection.
    if (!state.aborted) res.close();
  } finally {
    state.finished = true;
    if (state.aborted) void it.return?.();
  }
}

export async function send(res: HttpResponse, reply: HttpReply, state: ResponseState): Promise<void> {
  if (state.aborted) return;
  if (reply.stream) return sendStream(res, reply, reply.stream, state);
  const body = reply.json !== undefined ? JSON.stringify(reply.json) : (reply.body ?? reply.text ?? '');
  res.cork(() => {
    writeHead(res, reply);
    res.end(body);
  });
  state.finished = true;
}

/**
 * The request body as a Node stream. When the reader falls behind, uWS stops reading the socket
 * (pause) until the stream asks for more (resume): memory stays at the stream's window.
 */
function bodyStream(res: HttpResponse, state: ResponseState): Readable {
  let paused = false;
  const stream = new Readable({
    highWaterMark: 1024 * 1024,
    read() {
      if (paused && !state.aborted && !state.finished) {
        paused = false;
        res.resume();
      }
    },
  });
  res.onData((chunk, isLast) => {
    if (state.finished) return;
    if (!stream.push(Buffer.from(chunk.slice(0))) && !isLast) {
      paused = true;
      res.pause();
    }
    if (isLast) stream.push(null);
  });
  state.onAbort = () => stream.destroy(new PierError('BAD_REQUEST', 'request aborted'));
  return stream;
}

function paramNamesOf(path: string): string[] {
  return path.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
}

/**
 * Mounts a listener's route table: each route's handler, a 405 (with `Allow`) for other methods on
 * a known path, and a 404 for everything else. Handlers return replies or throw PierErrors; this is
 * the one place where an error becomes an HTTP status.
 */
export function mountRoutes(app: TemplatedApp, routes: Route[], deps: HttpDeps): void {
  const allowed = new Map<string, Method[]>();
  for (const route of routes) {
    if (route.method !== 'any') allowed.set(route.path, [...(allowed.get(route.path) ?? []), route.method]);
    const names = paramNamesOf(route.path);
    // A throw before the handler's promise chain (copying the request, setting up the body) is answered 500.
    const answerFailure = (res: HttpResponse) => void send(res, errorReply(new PierError('INTERNAL', 'internal error')), { aborted: false });
    app[route.method](route.path, isolated(`http ${route.path}`, deps, (res: HttpResponse, req: HttpRequest) => {
      const started = process.hrtime.bigint();
      const state: ResponseState = { aborted: false };
      res.onAborted(() => {
        state.aborted = true;
        state.onAbort?.();
      });
      const data = copyRequest(res, req, names);
      const limit = route.bodyLimit ?? 0;
      const stream = route.streamBody ? bodyStream(res, state) : undefined;
      // The gate starts now, in the same tick as the body reader, which holds the body until it passes.
      const gate = route.gate
        ? route.gate(data).then((refused) => {
            if (refused) throw new GateRefusal(refused);
          })
        : null;
      const bodyPromise = !stream && limit > 0 ? readBody(res, data.headers['content-length'] ?? '', limit, state, gate) : (gate ?? Promise.resolve()).then(() => Buffer.alloc(0));
      void bodyPromise
        .then((body) => route.handler({ ...data, body, stream }))
        .catch((err: unknown) => {
          if (err instanceof GateRefusal) return err.reply;
          const e = asPierError(err);
          if (e.status >= 500) deps.log.error({ err: e.cause ?? e, route: route.path }, e.message);
          return errorReply(e);
        })
        .then(async (reply) => {
          await send(res, reply, state);
          const labels = { listener: deps.listener, route: `${data.method.toUpperCase()} ${route.path}` };
          deps.metrics.httpRequests.inc({ ...labels, status: String(reply.status) });
          deps.metrics.httpSeconds.observe(labels, Number(process.hrtime.bigint() - started) / 1e9);
        })
        .catch((err: unknown) => {
          // Sending failed (the response went away mid-write): nothing left to answer; never unhandled.
          deps.metrics.handlerFailures.inc({ where: `http ${route.path}` });
          deps.log.warn({ err, route: route.path }, 'answer could not be sent');
        });
    }, answerFailure));
  }
  for (const [path, methods] of allowed) {
    const allow = methods.map((m) => (m === 'del' ? 'DELETE' : m.toUpperCase())).join(', ');
    app.any(path, (res) => {
      void send(res, { ...errorReply(new PierError('METHOD_NOT_ALLOWED', `method not allowed; use ${allow}`)), headers: { allow } }, { aborted: false });
    });
  }
  app.any('/*', (res) => void send(res, errorReply(new PierError('NOT_FOUND', 'no such route')), { aborted: false }));
}

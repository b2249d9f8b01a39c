import { traceFrom, withTrace, type TraceContext } from './trace.js';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BadRequestError, PayloadTooLargeError, PierError, UnauthorizedError } from '../errors.js';

/**
 * One event as Pier posts it to the app: a gateway event (docs/protocol.md "Gateway"), or a completed
 * upload for an app that declared `upload.callback` (`action: "upload"`, `data: {path, size}`,
 * `connId` empty, `seq` 0), signed the same way.
 */
export interface CallbackEvent {
  action: 'open' | 'message' | 'close' | 'upload';
  /**
   * The client's frame (`message`); `{}` for open (`{recovery}` when it asked to recover); for close
   * `{events: N}` (the open and messages before it: fewer received means some were given up) or
   * `{edgeLost: true}` (its edge was lost: the browser's last frames may be missing); `{path, size}`
   * for upload. Pier 0.2 sent `{}` for close.
   */
  data: unknown;
  userName: string;
  connId: string;
  eventId: string;
  /** Per connection, from 1, in the order the client caused them. */
  seq: number;
  /** The client's original `Cookie` header (`message` only). */
  cookie?: string;
  /** The event's trace (Pier's `traceparent`/`tracestate`), when Pier sent one: `onEvent` runs in it. */
  trace?: TraceContext;
}

/** The callback's JSON body as Pier sends it; `CallbackEvent` is what the app is handed. */
export interface CallbackBody {
  data: unknown;
  action: CallbackEvent['action'];
  user_name: string;
  conn_id: string;
}

export interface VerifyOptions {
  /** Oldest signature accepted, in seconds (default 300). */
  toleranceSec?: number;
  /** This process's clock (ms since the epoch). */
  now?: () => number;
}

type Headers = Record<string, string | string[] | undefined> | { get(name: string): string | null };

function header(headers: Headers, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(n: string): string | null }).get(name) ?? undefined;
  const v = (headers as Record<string, string | string[] | undefined>)[name] ?? (headers as Record<string, string | string[] | undefined>)[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The app's callback key: `HMAC-SHA256(app secret, "pier callback key v1")` in hex. Pier signs
 * callbacks with it, so the part of Pier that signs them never holds the app secret itself.
 */
export function callbackKey(appSecret: string): string {
  return createHmac('sha256', appSecret).update('pier callback key v1').digest('hex');
}

/**
 * Checks a callback's `X-Pier-Signature` (HMAC-SHA256 keyed by the app's callback key, derived
 * from the app secret here, over `<t>.<event id>.<raw body>`, compared in constant time) and its
 * age, then parses it. Anything
 * else — a bad or missing signature, a stamp outside the window, a body that is not an event — is
 * an UnauthorizedError or BadRequestError; nothing of a refused body is parsed first.
 */
export function verifyCallback(headers: Headers, rawBody: Uint8Array | string, appSecret: string, options: VerifyOptions = {}): CallbackEvent {
  const eventId = header(headers, 'x-pier-event-id');
  const stamp = header(headers, 'x-pier-signature');
  const m = stamp ? /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(stamp) : null;
  if (!eventId || !m) throw new UnauthorizedError(401, 401, 'callback: X-Pier-Signature or X-Pier-Event-Id missing or malformed');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody) : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const expected = createHmac('sha256', callbackKey(appSecret)).update(`${m[1]}.${eventId}.`).update(body).digest();
  if (!timingSafeEqual(expected, Buffer.from(m[2], 'hex'))) throw new UnauthorizedError(401, 401, 'callback: signature does not match');
  const ageSec = Math.abs((options.now ?? Date.now)() / 1000 - Number(m[1]));
  if (ageSec > (options.toleranceSec ?? 300)) throw new UnauthorizedError(401, 401, `callback: signed ${Math.round(ageSec)} s away from now, outside the window`);
  let parsed: { [K in keyof CallbackBody]?: unknown };
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new BadRequestError(400, 400, 'callback: body is not JSON');
  }
  const { action, user_name: userName, conn_id: connId } = parsed ?? {};
  if ((action !== 'open' && action !== 'message' && action !== 'close' && action !== 'upload') || typeof userName !== 'string' || typeof connId !== 'string') {
    throw new BadRequestError(400, 400, 'callback: body is not a gateway event');
  }
  const seq = Number(header(headers, 'x-pier-seq'));
  const cookie = header(headers, 'cookie');
  const trace = traceFrom(header(headers, 'traceparent'), header(headers, 'tracestate'));
  return { action, data: parsed.data ?? {}, userName, connId, eventId, seq: Number.isSafeInteger(seq) ? seq : 0, ...(cookie ? { cookie } : {}), ...(trace ? { trace } : {}) };
}

export interface ReceiverOptions extends VerifyOptions {
  /** Largest body read (default 1 MiB; Pier's frames are at most 64 KiB, base64 makes them larger). */
  maxBodyBytes?: number;
  /** Event ids remembered to answer retries without a second delivery (default 10,000). */
  remember?: number;
  /** Hears what was refused (bad signatures are worth a metric); default: nothing. */
  onRefused?: (err: PierError) => void;
}

/**
 * Gateway events in, typed and in order, each handed to `onEvent` once. Pier sends a connection's
 * next event only after the app acknowledged the previous one, so answering after `onEvent`
 * settles keeps the order. A retry of an event already handled (its acknowledgement was lost) is
 * acknowledged again without a second `onEvent`; so is a captured event replayed inside the window.
 * If `onEvent` throws, the answer is 500 and Pier retries the event.
 */
export class CallbackReceiver {
  private readonly seen = new Map<string, true>();
  /** Events being handled: a retry that arrives meanwhile waits for the same handling. */
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly appSecret: string,
    private readonly onEvent: (event: CallbackEvent) => unknown,
    private readonly options: ReceiverOptions = {},
  ) {}

  /** Handles one request's headers and raw body; answers the HTTP status to reply with. */
  async receive(headers: Headers, rawBody: Uint8Array | string): Promise<number> {
    let event: CallbackEvent;
    try {
      event = verifyCallback(headers, rawBody, this.appSecret, this.options);
    } catch (err) {
      const refusal = err instanceof PierError ? err : new BadRequestError(400, 400, 'callback: unreadable', undefined, { cause: err });
      this.options.onRefused?.(refusal);
      return refusal.status;
    }
    const id = event.eventId;
    if (this.seen.has(id)) return 200;
    let handling = this.running.get(id);
    if (!handling) {
      handling = Promise.resolve()
        .then(() => withTrace(event.trace, () => this.onEvent(event)))
        .then(() => {
          this.seen.set(id, true);
          if (this.seen.size > (this.options.remember ?? 10_000)) this.seen.delete(this.seen.keys().next().value!);
        })
        .finally(() => this.running.delete(id));
      this.running.set(id, handling);
    }
    await handling;
    return 200;
  }

  /**
   * A handler for Node's `http.createServer`, and express-style middleware (`app.post(path,
   * receiver.handler())`; mount it before any body parser, or where `req.rawBody` is kept).
   */
  handler(): (req: IncomingMessage & { rawBody?: Buffer }, res: ServerResponse, next?: (err?: unknown) => void) => void {
    const limit = this.options.maxBodyBytes ?? 1024 * 1024;
    return (req, res, next) => {
      const answer = (status: number) => {
        if (res.headersSent) return;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: status === 200 ? 0 : status, message: status === 200 ? 'success' : 'refused' }));
      };
      const run = (body: Buffer) =>
        this.receive(req.headers, body).then(answer, (err: unknown) => {
          answer(500);
          next?.(err);
        });
      if (req.rawBody) return void run(req.rawBody);
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        if (size > limit) return; // refused already: the rest is not kept
        size += c.length;
        if (size > limit) {
          this.options.onRefused?.(new PayloadTooLargeError(413, 413, `callback: body over ${limit} bytes`));
          // Answer, then drop the connection once the answer is out: the rest is never read.
          res.setHeader('connection', 'close');
          res.once('finish', () => req.destroy());
          answer(413);
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        if (size <= limit) void run(Buffer.concat(chunks));
      });
      req.on('error', () => undefined);
    };
  }
}

/** `new CallbackReceiver(secret, onEvent, options).handler()` in one call. */
export function callbackHandler(appSecret: string, onEvent: (event: CallbackEvent) => unknown, options: ReceiverOptions = {}) {
  return new CallbackReceiver(appSecret, onEvent, options).handler();
}

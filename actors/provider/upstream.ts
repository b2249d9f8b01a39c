import { Readable } from 'node:stream';
import { Agent, errors, type Dispatcher } from 'undici';
import { PierError } from '../../bus/errors.js';
import { activeTracer, currentTrace, traceHeaders, type Span } from '../../bus/trace.js';
import { isPolicyRefusal, type AddressPolicy } from '../../lib/policy/address-policy.js';
import { policyConnector } from '../../lib/policy/policy-connector.js';

/**
 * A provider's answer once its headers are in and either its whole body (`body`, when it ended
 * within `holdBytes`) or, past that, `stream`: the body from its first byte as it comes, read at
 * the reader's pace (the connection is paused while it does not read). Destroying `stream` before
 * its end cuts the call.
 */
export interface UpstreamAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer | null;
  stream: Readable | null;
}

export interface UpstreamInit {
  method: string;
  headers: Record<string, string>;
  body: Uint8Array | AsyncIterable<Uint8Array> | null;
  timeoutMs: number;
  /** An answer up to this size is handed over whole; a longer one as `stream`. */
  holdBytes: number;
  /** An answer longer than this (declared, or as it comes) fails with 413. */
  maxBytes: number;
}

export function answerTooLarge(provider: string, limit: number): PierError {
  return new PierError('PAYLOAD_TOO_LARGE', `answer of provider "${provider}" is larger than ${limit} bytes`);
}

/**
 * HTTP out to providers. One keep-alive pool per provider origin (undici's Agent), so a slow
 * provider fills only its own connections. Nothing is retried: a provider call may not be
 * idempotent.
 */
export class Upstream {
  private readonly agent: Agent;

  /** Every connection is dialled to an address the policy allows, resolved here, at dial time. */
  constructor(policy: AddressPolicy) {
    this.agent = new Agent({ connections: 128, pipelining: 1, keepAliveTimeout: 30_000, connect: policyConnector(policy) });
  }

  send(provider: string, url: { origin: string; path: string }, init: UpstreamInit): Promise<UpstreamAnswer> {
    // A span of the caller's trace (to the provider's answer headers), and its traceparent sent on:
    // the provider's host and path, never the query.
    const trace = currentTrace();
    const span = trace ? activeTracer().child(`${init.method} provider`, 'client', { 'pier.provider': provider, 'http.request.method': init.method, 'server.address': hostOf(url.origin), 'url.path': url.path.split('?')[0] }, trace) : null;
    const sent = span ?? trace ? { ...init.headers, ...traceHeaders(span?.context ?? trace) } : init.headers;
    return new Promise((resolve, reject) => {
      const answer = new AnswerHandler(provider, init, span, resolve, reject);
      // undici's request() (as this did before) refuses CONNECT; dispatch would tunnel it.
      if (init.method === 'CONNECT') return answer.onResponseError(null, new errors.InvalidArgumentError('invalid method'));
      // Straight to the agent with origin and path (no URL parsed per call), and read by a handler
      // of its own rather than request()'s: that makes a body stream, its listeners and their ticks
      // for every answer, where nearly every answer is one small chunk.
      try {
        this.agent.dispatch(
          {
            origin: url.origin,
            path: url.path,
            method: init.method as Dispatcher.HttpMethod,
            headers: sent,
            body: init.body as any,
            // Time to the answer's headers, then the longest silence inside its body.
            headersTimeout: init.timeoutMs,
            bodyTimeout: init.timeoutMs,
          },
          answer,
        );
      } catch (err) {
        // undici reports nearly every refusal to the handler; whatever it throws is one too.
        answer.onResponseError(null, err as Error);
      }
    });
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/**
 * Reads one answer for `Upstream.send`: its head, then its body held in memory up to `holdBytes`
 * (settled at its end), or past that passed on as a stream (settled then, the rest following at the
 * stream's pace). An error before settling rejects; after, it destroys the stream.
 */
class AnswerHandler implements Dispatcher.DispatchHandler {
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = NO_HEADERS;
  /** The body held so far: its first chunk, then (rarely) a list of them all. */
  private first: Buffer | null = null;
  private held: Buffer[] | null = null;
  private size = 0;
  private stream: Readable | null = null;
  private settled = false;
  private complete = false;

  constructor(
    private readonly provider: string,
    private readonly init: UpstreamInit,
    private span: Span | null,
    private readonly resolve: (a: UpstreamAnswer) => void,
    private readonly reject: (e: PierError) => void,
  ) {}

  // Its presence is what marks this handler as of undici's current API (controller, parsed headers).
  onRequestStart(): void {}

  onResponseStart(controller: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status < 200) return; // informational: the answer's own head follows
    this.status = status;
    this.headers = headers;
    const span = this.span;
    if (span) {
      this.span = null;
      span.set('http.response.status_code', status);
      if (status >= 500) span.fail(String(status));
      span.end();
    }
    if (Number(headers['content-length']) > this.init.maxBytes) controller.abort(answerTooLarge(this.provider, this.init.maxBytes));
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.size += chunk.byteLength;
    if (this.size > this.init.maxBytes) return controller.abort(answerTooLarge(this.provider, this.init.maxBytes));
    if (this.stream) {
      if (!this.stream.push(chunk)) controller.pause();
      return;
    }
    if (this.first === null) this.first = chunk;
    else (this.held ??= [this.first]).push(chunk);
    if (this.size > this.init.holdBytes) this.streamOn(controller);
  }

  /** Past `holdBytes`: what is held goes first into a stream read at its reader's pace (undici's body highWaterMark). */
  private streamOn(controller: Dispatcher.DispatchController): void {
    const stream = new Readable({
      highWaterMark: 64 * 1024,
      read: () => controller.resume(),
      destroy: (err, done) => {
        if (!this.complete) controller.abort(err ?? new errors.RequestAbortedError());
        done(err);
      },
    });
    // Destroyed with an error nobody is reading yet must not take the process down; a reader sees it through its own listener.
    stream.on('error', ignore);
    if (this.held) for (const c of this.held) stream.push(c);
    else stream.push(this.first);
    this.first = this.held = null;
    this.stream = stream;
    controller.pause();
    this.settle({ status: this.status, headers: this.headers, body: null, stream });
  }

  onResponseEnd(): void {
    this.complete = true;
    if (this.stream) {
      this.stream.push(null);
      return;
    }
    // An answer in one chunk (nearly all small ones) is that chunk: undici hands over a view of memory
    // it does not use again, so it need not be copied into a buffer of its own.
    const body = this.held ? Buffer.concat(this.held) : (this.first ?? NO_BODY);
    this.settle({ status: this.status, headers: this.headers, body, stream: null });
  }

  // Also called with no controller: a request refused before it was sent.
  onResponseError(_controller: Dispatcher.DispatchController | null, err: Error): void {
    if (this.settled) {
      this.stream?.destroy(err);
      return;
    }
    this.settled = true;
    const e = upstreamError(this.provider, this.init.timeoutMs, err);
    const span = this.span;
    if (span) {
      this.span = null;
      span.fail(e.code);
      span.end();
    }
    this.reject(e);
  }

  private settle(a: UpstreamAnswer): void {
    this.settled = true;
    this.resolve(a);
  }
}

const ignore = () => undefined;
const NO_HEADERS: Record<string, string | string[] | undefined> = {};
const NO_BODY = Buffer.alloc(0);

/** What went wrong talking to a provider, as the caller should hear it (no internal addresses). */
export function upstreamError(provider: string, timeoutMs: number, err: unknown): PierError {
  if (isPolicyRefusal(err)) {
    return new PierError('BAD_GATEWAY', `provider "${provider}" is not called: ${err.message}`);
  }
  if (err instanceof PierError) return err;
  const e = err as Error & { code?: string; name?: string };
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError || e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new PierError('TIMEOUT', `provider "${provider}" did not answer within ${timeoutMs} ms`, { cause: err });
  }
  const why = UNREACHABLE_BECAUSE[networkCode(err) ?? ''];
  return new PierError('BAD_GATEWAY', `provider "${provider}" is unreachable${why ? `: ${why}` : ''}`, { cause: err });
}

/**
 * Why a provider could not be reached, in words a developer can act on, and never its address
 * (the caller is another app: it learns what kind of failure, not where the provider lives).
 */
const UNREACHABLE_BECAUSE: Record<string, string> = {
  ENOTFOUND: "its endpoint's host name does not resolve",
  EAI_AGAIN: "its endpoint's host name does not resolve (the resolver did not answer)",
  ECONNREFUSED: 'its endpoint refused the connection (nothing listens there)',
  ECONNRESET: 'its endpoint closed the connection',
  EHOSTUNREACH: 'its endpoint cannot be reached (no route to it)',
  ENETUNREACH: 'its endpoint cannot be reached (no route to it)',
  UND_ERR_SOCKET: 'its endpoint closed the connection',
  UND_ERR_CONNECT_TIMEOUT: 'its endpoint did not accept the connection in time',
};

/** The system or undici error code of a failed request, where undici keeps it (the error or its cause). */
function networkCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | undefined;
  return [e?.code, e?.cause?.code].find((c): c is string => typeof c === 'string' && c in UNREACHABLE_BECAUSE);
}

/** The host of an origin, for a span (never a port's secrets: there are none, but no credentials either). */
function hostOf(origin: string): string {
  try {
    return new URL(origin).hostname;
  } catch {
    return '';
  }
}

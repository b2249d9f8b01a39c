import type { Readable } from 'node:stream';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { asPierError, PierError } from '../../bus/errors.js';
import { errorReply } from './envelope.js';
import type { HttpDeps, HttpReply, Method, Route } from './http.js';
import { isolated } from './isolate.js';
import { abortRelay, bodyStream, copyRequest, paramNamesOf, readBody } from './uws-request.js';
import { send, type ResponseState } from './uws-response.js';
import { activeTracer, runInTrace, type ParentTrust, type Span } from '../../bus/trace.js';

/** Probes and metrics: never a span. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/** A gate's refusal: answered as it is, the body never read. */
class GateRefusal extends Error {
  constructor(readonly reply: HttpReply) {
    super('refused before the body');
  }
}

/** Answers a request outside any route's handler (405, 404, a failure before the handler). */
const answerWith = (deps: HttpDeps) => (res: HttpResponse, reply: HttpReply) => void send(res, reply, { aborted: false, closeConnection: deps.closing?.() === true });

/**
 * Mounts a listener's route table: each route's handler, a 405 (with `Allow`) for other methods on
 * a known path, and a 404 for everything else. Handlers return replies or throw PierErrors; this is
 * the one place where an error becomes an HTTP status.
 */
export function mountRoutes(app: TemplatedApp, routes: Route[], deps: HttpDeps): void {
  const answer = answerWith(deps);
  const allowed = new Map<string, Method[]>();
  for (const route of routes) {
    if (route.method !== 'any') allowed.set(route.path, [...(allowed.get(route.path) ?? []), route.method]);
    // A throw before the handler's promise chain (copying the request, setting up the body) is answered 500.
    const answerFailure = (res: HttpResponse) => answer(res, errorReply(new PierError('INTERNAL', 'internal error')));
    app[route.method](route.path, isolated(`http ${route.path}`, deps, serveRoute(route, deps), answerFailure));
  }
  for (const [path, methods] of allowed) {
    const allow = methods.map((m) => (m === 'del' ? 'DELETE' : m.toUpperCase())).join(', ');
    app.any(path, (res) => answer(res, { ...errorReply(new PierError('METHOD_NOT_ALLOWED', `method not allowed; use ${allow}`)), headers: { allow } }));
  }
  app.any('/*', (res) => answer(res, errorReply(new PierError('NOT_FOUND', 'no such route'))));
}

/**
 * One route's uWS callback: copy the request, run the gate beside the body reader, hand the body
 * to the handler, turn a throw into its status, send, and count.
 */
function serveRoute(route: Route, deps: HttpDeps): (res: HttpResponse, req: HttpRequest) => void {
  const names = paramNamesOf(route.path);
  // This route's metric series, each looked up once by method and status (prom-client hashes the
  // labels on every call otherwise); bounded: a few methods times the statuses Pier answers.
  // By method, then status: no key string made per request.
  type Series = { count: { inc(): void }; seconds: { observe(v: number): void } };
  const series = new Map<string, Map<number, Series>>();
  const observe = (method: string, status: number, started: number) => {
    let byStatus = series.get(method);
    if (!byStatus) series.set(method, (byStatus = new Map()));
    let s = byStatus.get(status);
    if (!s) {
      const name = `${method.toUpperCase()} ${route.path}`;
      byStatus.set(status, (s = { count: deps.metrics.httpCount(deps.listener, name, String(status)), seconds: deps.metrics.httpTime(deps.listener, name) }));
    }
    s.count.inc();
    s.seconds.observe((performance.now() - started) / 1000);
  };
  const answer = answerWith(deps);
  // Browsers call the public and upload listeners; apps, local callers and the operator the others.
  const browsers = deps.listener === 'public' || deps.listener === 'upload';
  // A balancer's checks and a scraper's pulls are not traced: they would be most of the traces.
  const untraced = UNTRACED.has(route.path);
  // An app's or the operator's traceparent is followed once its gate has checked who is calling: the
  // span starts then. Whoever else calls these listeners is anonymous to tracing (docs/operations.md
  // "Tracing"): a sampled flag anybody can send must not make Pier export a span per request.
  const afterGate = !browsers && route.gateChecksCaller === true && route.gate !== undefined;
  return (res, req) => {
    // A double, not hrtime's bigint: nothing allocated to time a request.
    const started = performance.now();
    const state: ResponseState = { aborted: false };
    res.onAborted(abortRelay(state));
    const data = copyRequest(res, req, names, state);
    if (deps.hostAllowed && !deps.hostAllowed(data.headers.host)) {
      answer(res, errorReply(new PierError('FORBIDDEN', 'Host: this listener answers only loopback names, IP addresses and the names in PIER_ADMIN_HOSTS')));
      observe(data.method, 403, started);
      return;
    }
    // The request's span (its trace from the caller's traceparent: an app's or the operator's is
    // followed once its gate has passed, a browser's only as a hint, anyone else's is linked), around
    // everything done for it; the path template, never the query.
    // With export off and no traceparent (nearly every request), nothing at all is made.
    const tracer = activeTracer();
    if (untraced || (!tracer.exporting && data.headers.traceparent === undefined)) return handle(res, data, state, started, null, null);
    const carrier = { traceparent: data.headers.traceparent, tracestate: data.headers.tracestate };
    const attributes = { 'http.request.method': data.method.toUpperCase(), 'http.route': route.path, 'pier.listener': deps.listener };
    const open = (trust: ParentTrust, startedAt?: number) => tracer.incoming(`${data.method.toUpperCase()} ${route.path}`, 'server', carrier, trust, attributes, undefined, startedAt);
    if (afterGate) {
      // Its gate runs outside any trace: what it asks is not yet known to be the caller's.
      const arrived = performance.now();
      return handle(res, data, state, started, null, (passed) => open(passed ? 'trusted' : 'anonymous', arrived));
    }
    const span = open(browsers ? 'hint' : 'anonymous');
    if (span) runInTrace(span.context, () => handle(res, data, state, started, span, null));
    else handle(res, data, state, started, null, null);
  };

  /**
   * The request's work, from its gate and body to the answer sent and counted. `openAfterGate`, for
   * a route whose gate checks the caller, starts the span once the gate has answered (or the request
   * ended without it, a body too large say: then as an anonymous caller's).
   */
  function handle(res: HttpResponse, data: ReturnType<typeof copyRequest>, state: ResponseState, started: number, given: Span | null, openAfterGate: ((passed: boolean) => Span | null) | null): void {
    let span = given;
    let opened = openAfterGate === null;
    const openSpan = (passed: boolean) => {
      if (opened) return;
      opened = true;
      span = openAfterGate!(passed);
    };
    const limit = route.bodyLimit ?? 0;
    const stream = route.streamBody ? bodyStream(res, state, route.bodyPool) : undefined;
    // A pass the route remembers lets the body through with no gate run and no promise made. Not when
    // a span is to open after the gate: the trust it gets follows the gate's own answer, as it always did.
    const gated = route.gate !== undefined && !(openAfterGate === null && route.gatePassed?.(data) === true);
    // The gate starts now, in the same tick as the body reader, which holds the body until it passes.
    const gate = gated
      ? route.gate!(data).then(
          (refused) => {
            openSpan(!refused);
            if (refused) throw new GateRefusal(refused);
          },
          (err: unknown) => {
            openSpan(false);
            throw err;
          },
        )
      : null;
    const bodyPromise = !stream && limit > 0 ? readBody(res, data.headers['content-length'] ?? '', limit, state, gate) : (gate ?? Promise.resolve()).then(() => Buffer.alloc(0));
    // Counted from here, where the one chain that ends it begins (a stop waits for it): whatever
    // threw before this answered through the isolation wrapper, and was never counted.
    const inFlight = deps.inFlight;
    if (inFlight) inFlight.count++;
    void respond(bodyPromise, stream);

    /**
     * The handler's reply (or the error its throw becomes) sent and counted, in one async function
     * rather than a chain of five promises and their callbacks per request.
     */
    async function respond(body: Promise<Buffer>, bodyStream: Readable | undefined): Promise<void> {
      let reply: HttpReply;
      try {
        // Set, not spread: a spread would read the lazy remote address of every request.
        data.body = await body;
        data.stream = bodyStream;
        // In the span opened after the gate, when there is one (otherwise already the running trace).
        reply = await runInTrace(span?.context, () => route.handler(data));
      } catch (err) {
        openSpan(false);
        if (err instanceof GateRefusal) reply = err.reply;
        else {
          const e = asPierError(err);
          if (e.status >= 500) deps.log.error({ err: e.cause ?? e, route: route.path }, e.message);
          if (e.status >= 500) span?.fail(e.code);
          reply = errorReply(e);
        }
      }
      try {
        span?.set('http.response.status_code', reply.status);
        span?.end();
        // Asked when the answer leaves, not when the request came: a drain that began meanwhile counts.
        state.closeConnection = deps.closing?.() === true;
        const sending = send(res, reply, state);
        if (sending) await sending;
        // uWS keeps the abort relay, and so `state`, until the connection's next request: let go of the reader.
        state.onAbort = undefined;
        observe(data.method, reply.status, started);
      } catch (err) {
        // Sending failed (the response went away mid-write): nothing left to answer; never unhandled.
        deps.metrics.handlerFailures.inc({ where: `http ${route.path}` });
        deps.log.warn({ err, route: route.path }, 'answer could not be sent');
      } finally {
        if (inFlight) inFlight.count--;
      }
    }
  }
}

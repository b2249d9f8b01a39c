import type { Bus, BusMessage, Headers, LocalReply, LocalServer, Subscription } from './bus.js';
import { answerable, encodeReply, openReply, refuse, settle, speaks, unsupportedVersion, outgoing, type Reply } from './envelope.js';
import { asPierError, ErrorReasons, PierError } from './errors.js';
import type { Exchange } from './exchange.js';
import { openRequest, openSealedReply, replyKeyOf, sealReply, sealRequest, signMessage, verifiedMessage } from './sealed.js';
import { activeTracer, currentTrace, runInTrace, traceHeaders, type Span, type TraceContext } from './trace.js';
import { assertValid, throwIfInvalid } from './validation.js';

/**
 * The verbs of the bus, the same for every exchange (`exchange.ts`): `serve` answers, `ask` asks one
 * server, `gather` asks every server, `tell` says, `hear` listens. Each does the whole of its side
 * once: the version slot, sealing or signing, the codec, the schema check (a sender checks before
 * its message leaves, a receiver again: it is the trust boundary), the answer format, refusal
 * counting, and passing values by reference within one process for a `shared` exchange.
 */

const subjectOf = (ex: Exchange<unknown, unknown>, answered = false): string => {
  if (answered && ex.oneWay) throw new TypeError('a one-way exchange is told and heard, never asked or served');
  if (ex.subject === undefined) throw new TypeError('this exchange has its subject built at run time: use at(exchange, subject)');
  return ex.subject;
};

/** Seconds since `started` (a `performance.now()`): a double, nothing allocated to time a request. */
const secondsSince = (started: number) => (performance.now() - started) / 1000;

export interface ServeHooks {
  /** Called after each request with the subject, duration and error (if any). */
  observe?: (subject: string, seconds: number, error: PierError | undefined) => void;
}

/** A request as its handler may take it: one failing the schema is refused, counted, and answered BAD_REQUEST. */
function checked<Req>(ex: Exchange<Req, unknown>, subject: string, req: unknown): Req {
  const errors = ex.check(req);
  if (errors.length > 0) refuse(subject, 'schema');
  throwIfInvalid(errors);
  return req as Req;
}

/**
 * Serves an exchange: each request is decoded and checked (the trust boundary: whatever sent it),
 * the handler runs, and its answer or its error goes back in the one answer format. A handler's
 * exception never escapes: an unknown failure is a generic INTERNAL error on the wire. A `shared`
 * exchange's request from this process arrives as a value instead of bytes, checked the same way.
 */
export function serve<Req, Res>(bus: Bus, ex: Exchange<Req, Res>, handler: (req: Req) => Promise<Res> | Res, hooks: ServeHooks = {}): Subscription {
  const subject = subjectOf(ex, true);
  /**
   * Runs one request's work (in its span's trace, when it has one); never rejects: a failure is the
   * answer's error, as it would cross a wire. One async function: no promise chain per request.
   */
  const answer = async (started: number, work: () => Promise<Res> | Res, span: Span | null = null): Promise<Reply<Res>> => {
    try {
      const data = await runInTrace(span?.context, work);
      hooks.observe?.(subject, secondsSince(started), undefined);
      span?.end();
      return { ok: true, data };
    } catch (err) {
      const error = asPierError(err);
      hooks.observe?.(subject, secondsSince(started), error);
      span?.fail(error.code);
      span?.end();
      return { ok: false, error: error.toWire() };
    }
  };
  // A value from this process is checked here too, against this exchange's own schema, in the turn
  // the handler runs: whatever the caller declared or did with its object after sending it.
  const local: LocalServer | undefined = ex.shared ? (value) => answer(performance.now(), () => handler(checked(ex, subject, value))) as Promise<LocalReply> : undefined;
  return bus.subscribe(
    subject,
    (msg) => {
      if (!answerable(msg)) return;
      const started = performance.now();
      const sealable = { subject: msg.subject, seal: ex.seal };
      const replyKey = replyKeyOf(bus, sealable, msg);
      void answer(started, () => handler(checked(ex, msg.subject, opened(bus, ex, msg, replyKey))), receivedSpan(msg))
        .then((reply) => {
          if (msg.reply) bus.publish(msg.reply, sealReply(bus, sealable, replyKey, reply.ok, encodeReply(reply)));
        })
        .catch(() => undefined); // publishing to a closed bus at shutdown: nobody is left to answer
    },
    { queue: ex.queue, local },
  );
}

/**
 * The span of a request that came over the bus: its trace from the sender's headers (a Pier
 * process: trusted), named by its subject, never by anything in its payload.
 */
function receivedSpan(msg: BusMessage): Span | null {
  const traceparent = msg.headers?.traceparent;
  if (traceparent === undefined) return null;
  return activeTracer().incoming(msg.subject, 'server', { traceparent, tracestate: msg.headers?.tracestate }, 'trusted', { 'messaging.system': 'nats', 'messaging.destination.name': msg.subject });
}

/** A request's span on the asking side (a child of the current work), and the headers carrying the trace on. */
const UNTRACED = { span: null, context: undefined } as const;

function sendingSpan(subject: string): { span: Span | null; context: TraceContext | undefined } {
  const now = currentTrace();
  if (!now) return UNTRACED;
  const span = activeTracer().child(`send ${subject}`, 'client', { 'messaging.system': 'nats', 'messaging.destination.name': subject }, now);
  return { span, context: span?.context ?? now };
}

/** `headers` with the trace's two headers added (none without a trace). */
const withTrace = (headers: Headers | undefined, context: TraceContext | undefined): Headers | undefined => (context ? { ...headers, ...traceHeaders(context) } : headers);

/** A request's value: its version spoken, its seal opened, its bytes decoded; throws (refused, counted) otherwise. */
function opened(bus: Bus, ex: Exchange<unknown, unknown>, msg: BusMessage, replyKey: Uint8Array | undefined): unknown {
  if (!speaks(msg.headers)) {
    refuse(msg.subject, 'version');
    throw unsupportedVersion(msg.subject, msg.headers);
  }
  let bytes: Uint8Array;
  try {
    bytes = openRequest(bus, { subject: msg.subject, seal: ex.seal }, msg, replyKey);
  } catch (err) {
    refuse(msg.subject, 'sealed');
    throw err;
  }
  try {
    return ex.codec.decode(bytes, msg.headers);
  } catch (err) {
    refuse(msg.subject, 'undecodable');
    throw new PierError('BAD_REQUEST', 'message is not valid msgpack', { cause: err });
  }
}

/**
 * Asks one server of the exchange. The request is checked before it leaves; an error answer is
 * thrown as PierError. `wire`: the format the request is in, when past 1 (bus/envelope.ts).
 */
export async function ask<Req, Res>(bus: Bus, ex: Exchange<Req, Res>, req: Req, options: { timeoutMs?: number; wire?: number } = {}): Promise<Res> {
  const subject = subjectOf(ex, true);
  const timeoutMs = options.timeoutMs ?? ex.timeoutMs;
  assertValid(ex.check, req);
  const local = ex.shared ? bus.requestLocal?.(subject, req, { timeoutMs }) : undefined;
  if (local) return settle<Res>(subject, await local, ex.replyCheck);
  const { data, headers } = ex.codec.encode(req);
  const sealable = { subject, seal: ex.seal };
  const { span, context } = sendingSpan(subject);
  try {
    // Only a sealed request needs a wait before it leaves (its recipient's key): the usual one goes now.
    const sealed = bus.sealing && ex.seal ? await sealRequest(bus, sealable, data) : { data };
    const msg = await bus.request(subject, sealed.data, { timeoutMs, headers: withTrace(outgoing(headers, options.wire), context) }).catch((err: unknown) => {
      // Said in words an operator acts on: which role has no process running, not a subject.
      if (ex.queue && err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS)) {
        throw new PierError('UNAVAILABLE', `no ${ex.queue} replica is running (nothing answers ${subject})`, { cause: err, reason: ErrorReasons.NO_RESPONDERS });
      }
      throw err;
    });
    const bytes = bus.sealing && ex.seal ? openSealedReply(bus, sealable, msg, sealed) : msg.data;
    return openReply<Res>(subject, bytes, msg.headers, ex.replyCheck);
  } catch (err) {
    span?.fail(asPierError(err).code);
    throw err;
  } finally {
    span?.end();
  }
}

/** Asks every server of the exchange: each answer within the deadline (see Bus.requestMany); failures and garbled answers are dropped. */
export async function gather<Req, Res>(bus: Bus, ex: Exchange<Req, Res>, req: Req, options: { timeoutMs?: number; stallMs: number; expected?: number }): Promise<Res[]> {
  const subject = subjectOf(ex, true);
  assertValid(ex.check, req);
  const { data, headers } = ex.codec.encode(req);
  const { span, context } = sendingSpan(subject);
  const replies = await bus
    .requestMany(subject, data, { timeoutMs: options.timeoutMs ?? ex.timeoutMs, stallMs: options.stallMs, expected: options.expected, headers: withTrace(outgoing(headers), context) })
    .finally(() => span?.end());
  const answers: Res[] = [];
  for (const m of replies) {
    try {
      answers.push(openReply<Res>(subject, m.data, m.headers, ex.replyCheck));
    } catch {
      // A server that failed, or answered nonsense, is not among the answers.
    }
  }
  return answers;
}

/** Says a one-way message (checked before it leaves; signed when the exchange says so). */
export function tell<T>(bus: Bus, ex: Exchange<T, never>, value: T): void {
  const subject = subjectOf(ex as Exchange<unknown, unknown>);
  assertValid(ex.check, value);
  const { data, headers } = ex.codec.encode(value);
  const out = outgoing(headers);
  bus.publish(subject, signMessage(bus, { subject, seal: ex.seal }, data), out ? { headers: out } : undefined);
}

/**
 * Hears a one-way message (a wildcard subject too: the handler gets the subject each came on). What
 * fails its version, signature, decoding or schema is refused and counted, never handled.
 */
export function hear<T>(bus: Bus, ex: Exchange<T, never>, handler: (value: T, subject: string) => void): Subscription {
  return bus.subscribe(
    subjectOf(ex as Exchange<unknown, unknown>),
    (msg) => {
      if (!speaks(msg.headers)) return refuse(msg.subject, 'version');
      const payload = verifiedMessage(bus, ex.seal, msg);
      if (payload === undefined) return;
      let value: unknown;
      try {
        value = ex.codec.decode(payload, msg.headers);
      } catch {
        return refuse(msg.subject, 'undecodable');
      }
      if (ex.check(value).length > 0) return refuse(msg.subject, 'schema');
      handler(value as T, msg.subject);
    },
    { queue: ex.queue },
  );
}

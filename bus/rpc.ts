import type { Bus, BusMessage, LocalReply, LocalServer, Subscription } from './bus.js';
import { decode, encode } from './codec.js';
import { asPierError, ErrorReasons, PierError, type WireError } from './errors.js';
import { assertValid, compile, throwIfInvalid, type Checker } from './validation.js';
import { openReply, openRequest, sealReply, sealRequest, replyKeyOf, type SealSpec } from './sealed.js';
import type { ValidationSchema } from 'fastest-validator';

/**
 * A request/reply endpoint: its subject, the queue group its actor replicas share, its deadline
 * and the schema of its request. Declared in `subjects.ts`, nowhere else.
 */
export interface Endpoint<Req, Res> {
  readonly subject: string;
  readonly queue: string;
  readonly timeoutMs: number;
  readonly check: Checker;
  /** What of the exchange carries a secret, and is sealed on a wire (bus/seal.ts, `sealed.ts`). */
  readonly seal?: SealSpec;
  /**
   * Within one process (the in-process bus), the request and the answer are passed by reference,
   * not encoded (`requestLocal` in bus.ts), and still checked on both sides. Declared only where
   * the request is built afresh for each call, and where the handler neither keeps nor changes it
   * nor answers with anything it keeps (PIER_FREEZE_SHARED=1 in the tests makes a breach throw).
   */
  readonly shared?: true;
  /** Phantom fields that carry the request and reply types; never set. */
  readonly _req?: Req;
  readonly _res?: Res;
}

export function endpoint<Req, Res>(subject: string, queue: string, schema: ValidationSchema, timeoutMs = 5_000, seal?: SealSpec): Endpoint<Req, Res> {
  return { subject, queue, timeoutMs, check: compile(schema), ...(seal ? { seal } : {}) };
}

/** The endpoint, its request and answer passed by reference within one process (see `Endpoint.shared`). */
export function shared<Req, Res>(ep: Endpoint<Req, Res>): Endpoint<Req, Res> {
  return { ...ep, shared: true };
}

type Reply<Res> = { ok: true; data: Res } | { ok: false; error: WireError };

/** Why a received message was refused before any handler saw it. */
export type RefusalReason = 'undecodable' | 'schema' | 'reply' | 'sealed';
type RefusalListener = (subject: string, reason: RefusalReason) => void;
let refusalListener: RefusalListener = () => undefined;

/** Counts a message refused before any handler saw it. */
export function refuse(subject: string, reason: RefusalReason): void {
  refusalListener(subject, reason);
}

/** The process's counter of refused messages (cli/start.ts wires it to `pier_bus_refusals_total`). */
export function onRefusal(listener: RefusalListener): void {
  refusalListener = listener;
}

/**
 * Decodes a message a handler received and checks it against its schema (the trust boundary:
 * whatever sent it). Undefined when it fails: the message is refused and counted, the handler
 * never sees it, and the receiver goes on.
 */
export function accept<T>(msg: BusMessage, check: Checker): T | undefined {
  let value: unknown;
  try {
    value = decode(msg.data);
  } catch {
    refusalListener(msg.subject, 'undecodable');
    return undefined;
  }
  if (check(value).length > 0) {
    refusalListener(msg.subject, 'schema');
    return undefined;
  }
  return value as T;
}

/**
 * Whether a request may be answered: Pier's requesters always wait on an inbox (`_INBOX.<identity>.…`).
 * A reply subject naming anything else would make the responder publish its answer there with its
 * own rights (NATS \`allow_responses\`): another role's endpoint, say. Such a request is refused
 * before any handler runs, and counted.
 */
export function answerable(msg: BusMessage): boolean {
  if (msg.reply === undefined || msg.reply.startsWith('_INBOX.')) return true;
  refusalListener(msg.subject, 'reply');
  return false;
}

export interface ServeHooks {
  /** Called after each request with the endpoint subject, duration and error (if any). */
  observe?: (subject: string, seconds: number, error: PierError | undefined) => void;
}

/**
 * Serves an endpoint: decodes and validates each request (the actor's trust boundary), runs the
 * handler, and replies with `{ok, data}` or `{ok: false, error}`. A handler's exception never
 * escapes: unknown failures become a generic INTERNAL error on the wire. A `shared` endpoint's
 * request from this process arrives as a value instead of bytes, and is validated the same way.
 */
export function serve<Req, Res>(
  bus: Bus,
  ep: Endpoint<Req, Res>,
  handler: (req: Req, msg: BusMessage) => Promise<Res> | Res,
  hooks: ServeHooks = {},
): Subscription {
  /** Runs one request's work; never rejects: a failure is the answer's error, as it would cross a wire. */
  const answer = (started: bigint, work: () => Promise<Res>): Promise<Reply<Res>> =>
    work().then(
      (data) => {
        hooks.observe?.(ep.subject, secondsSince(started), undefined);
        return { ok: true, data };
      },
      (err: unknown) => {
        const error = asPierError(err);
        hooks.observe?.(ep.subject, secondsSince(started), error);
        return { ok: false, error: error.toWire() };
      },
    );
  // A value from this process is checked here too, against this endpoint's own schema, in the turn
  // the handler runs: whatever the caller declared or did with its object after sending it.
  const asValue: BusMessage = Object.freeze({ subject: ep.subject, data: new Uint8Array(0), headers: undefined, reply: undefined });
  const local: LocalServer | undefined = ep.shared
    ? (value) =>
        answer(process.hrtime.bigint(), async () => handler(checked<Req>(ep, value), asValue)) as Promise<LocalReply>
    : undefined;
  return bus.subscribe(
    ep.subject,
    (msg) => {
      if (!answerable(msg)) return;
      const started = process.hrtime.bigint();
      const replyKey = replyKeyOf(bus, ep, msg);
      void answer(started, async () => {
        let req: Req;
        let bytes: Uint8Array;
        try {
          bytes = openRequest(bus, ep, msg, replyKey);
        } catch (err) {
          refusalListener(msg.subject, 'sealed');
          throw err;
        }
        try {
          req = decode<Req>(bytes);
        } catch (err) {
          refusalListener(msg.subject, 'undecodable');
          throw new PierError('BAD_REQUEST', 'message is not valid msgpack', { cause: err });
        }
        return handler(checked<Req>(ep, req), msg);
      })
        .then((reply) => {
          if (msg.reply) bus.publish(msg.reply, sealReply(bus, ep, replyKey, reply.ok, encodeReply(reply)));
        })
        .catch(() => undefined); // publishing to a closed bus at shutdown: nobody is left to answer
    },
    { queue: ep.queue, local },
  );
}

/** A request as its endpoint's handler may take it: one failing the schema is refused, counted, and answered BAD_REQUEST. */
function checked<Req>(ep: Endpoint<unknown, unknown>, req: unknown): Req {
  const errors = ep.check(req);
  if (errors.length > 0) refusalListener(ep.subject, 'schema');
  throwIfInvalid(errors);
  return req as Req;
}

const secondsSince = (started: bigint) => Number(process.hrtime.bigint() - started) / 1e9;

/** A reply that cannot be encoded (a handler's bug) still answers: a generic INTERNAL error, never a hang. */
function encodeReply<Res>(reply: Reply<Res>): Uint8Array {
  try {
    return encode(reply);
  } catch {
    return encode({ ok: false, error: new PierError('INTERNAL', 'internal error').toWire() });
  }
}

/** Calls an endpoint. The request is checked before it leaves; an error reply is thrown as PierError. */
export async function call<Req, Res>(bus: Bus, ep: Endpoint<Req, Res>, req: Req, timeoutMs = ep.timeoutMs): Promise<Res> {
  assertValid(ep.check, req);
  const local = ep.shared ? bus.requestLocal?.(ep.subject, req, { timeoutMs }) : undefined;
  if (local) return settled((await local) as Reply<Res>);
  // Only a sealed request needs a wait before it leaves (its recipient's key): the usual one goes now.
  const sealed = bus.sealing && ep.seal ? await sealRequest(bus, ep, encode(req)) : { data: encode(req) };
  const msg = await bus.request(ep.subject, sealed.data, { timeoutMs }).catch((err: unknown) => {
    // Said in words an operator acts on: which role has no process running, not a subject.
    if (err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS)) {
      throw new PierError('UNAVAILABLE', `no ${ep.queue} replica is running (nothing answers ${ep.subject})`, { cause: err });
    }
    throw err;
  });
  return settled(decode<Reply<Res>>(openReply(bus, ep, msg, sealed)));
}

function settled<Res>(reply: Reply<Res>): Res {
  if (reply.ok) return reply.data;
  throw PierError.fromWire(reply.error);
}

/** A typed pub/sub event subject (no reply), with the schema every receiver checks. */
export interface EventSubject<T> {
  readonly subject: string;
  readonly check: Checker;
  /**
   * The role whose anchored key signs the event on a wire (docs/security.md, "Keys with an
   * anchor"): receivers refuse it unsigned or signed by any other key. For what every process
   * believes (the registry's changes), which only that role may say.
   */
  readonly signedBy?: string;
  readonly _type?: T;
}

export function event<T>(subject: string, schema: ValidationSchema, options: { signedBy?: string } = {}): EventSubject<T> {
  return { subject, check: compile(schema), ...(options.signedBy ? { signedBy: options.signedBy } : {}) };
}

/** An Ed25519 signature, then the event: what a signed event is on a wire. */
const SIGNATURE_BYTES = 64;
const signedPart = (subject: string, payload: Uint8Array) => Buffer.concat([Buffer.from(`${subject}|`), payload]);

export function publishEvent<T>(bus: Bus, ev: EventSubject<T>, value: T): void {
  const payload = encode(value);
  if (!ev.signedBy || !bus.sealing) return bus.publish(ev.subject, payload);
  const sig = bus.sealing.signAs(ev.signedBy, signedPart(ev.subject, payload));
  if (!sig) throw new PierError('INTERNAL', `${ev.subject}: this process does not hold the ${ev.signedBy} key to sign with`);
  bus.publish(ev.subject, Buffer.concat([sig, payload]));
}

/** A signed event's payload, when its signature is by the role's anchored key; undefined (refused, counted) otherwise. */
function verified(bus: Bus, ev: EventSubject<unknown>, msg: BusMessage): BusMessage | undefined {
  if (!ev.signedBy || !bus.sealing) return msg;
  const payload = msg.data.subarray(SIGNATURE_BYTES);
  if (msg.data.byteLength > SIGNATURE_BYTES && bus.sealing.signedAs(ev.signedBy, signedPart(msg.subject, payload), msg.data.subarray(0, SIGNATURE_BYTES))) return { ...msg, data: payload };
  refusalListener(msg.subject, 'sealed');
  return undefined;
}

/** Hears an event: what fails its schema, or its signature, is refused and counted (`accept`), never handled. */
export function onEvent<T>(bus: Bus, ev: EventSubject<T>, handler: (value: T) => void): Subscription {
  return bus.subscribe(ev.subject, (raw) => {
    const msg = verified(bus, ev as EventSubject<unknown>, raw);
    if (msg === undefined) return;
    const value = accept<T>(msg, ev.check);
    if (value !== undefined) handler(value);
  });
}

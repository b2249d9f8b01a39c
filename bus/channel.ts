import type { Bus, BusMessage, LocalReply, LocalServer, Subscription } from './bus.js';
import { encode } from './codec.js';
import { asPierError, PierError, type WireError } from './errors.js';
import { accept, answerable, refuse } from './rpc.js';
import { compile, type Checker } from './validation.js';
import type { ValidationSchema } from 'fastest-validator';

/**
 * A request/reply exchange on subjects built at run time (one edge's, one user's, one replica's),
 * with a schema for the request and one for the reply (both objects), checked by their receivers. Endpoints
 * (`rpc.ts`) have one subject and a queue group; channels are for directed and scatter-gather
 * traffic. With them no code outside `bus/` touches raw subscribe, publish or decode.
 */
export interface Channel<Req, Res> {
  readonly check: Checker;
  readonly replyCheck: Checker;
  readonly timeoutMs: number;
  /**
   * Requests carry a secret: on a wire they are sealed to this role's anchored key (bus/seal.ts,
   * docs/security.md "Keys with an anchor"), never to a key a replica only announced.
   */
  readonly sealed: string | null;
  /**
   * Within one process (the in-process bus) the request and the reply are passed by reference, not
   * encoded; both are still checked against their schemas. Declared only where neither side changes
   * what it sent or received (PIER_FREEZE_SHARED=1 in the tests makes a breach throw). See rpc.ts.
   */
  readonly shared: boolean;
  readonly _req?: Req;
  readonly _res?: Res;
}

export function channel<Req, Res>(schema: ValidationSchema, replySchema: ValidationSchema, timeoutMs = 2_000, options: { sealed?: string; shared?: boolean } = {}): Channel<Req, Res> {
  return { check: compile(schema), replyCheck: compile(replySchema), timeoutMs, sealed: options.sealed ?? null, shared: options.shared ?? false };
}

const sealedContext = (subject: string) => `${subject}|request|`;

/** A sealed channel's request, opened with this process's key of the role; undefined (refused, counted) when it does not open. */
function openSealed(bus: Bus, ch: Channel<unknown, unknown>, msg: BusMessage): BusMessage | undefined {
  if (!ch.sealed || !bus.sealing) return msg;
  try {
    return { ...msg, data: bus.sealing.sealer.open(msg.data, sealedContext(msg.subject), bus.sealing.roleKeys(ch.sealed)).plain };
  } catch {
    refuse(msg.subject, 'sealed');
    return undefined;
  }
}

/** A one-way message on run-time subjects (no reply), checked by its receivers. */
export interface Signal<T> {
  readonly check: Checker;
  readonly _type?: T;
}

export function signal<T>(schema: ValidationSchema): Signal<T> {
  return { check: compile(schema) };
}

const refusedReply = () => new PierError('BAD_GATEWAY', 'bus: a reply failed its schema');

/**
 * Answers `ch` requests on `subject`: each request is checked (refused and counted when it fails,
 * never handled), the handler's result is the reply. A handler's throw is answered at once, as the
 * typed error (an unknown failure as a generic INTERNAL one), marked by the `pier-error` header, so
 * the requester hears it rather than waiting out its deadline (the reply convention of `serve`).
 */
export function answerOn<Req, Res>(bus: Bus, ch: Channel<Req, Res>, subject: string, handler: (req: Req, msg: BusMessage) => Res | Promise<Res>): Subscription {
  const asValue: BusMessage = Object.freeze({ subject, data: new Uint8Array(0), headers: undefined, reply: undefined });
  // A value from this process is checked as bytes are; one that fails is refused and counted, never answered (as on a wire).
  const local: LocalServer | undefined = ch.shared
    ? (value) => {
        if (ch.check(value).length > 0) {
          refuse(subject, 'schema');
          return new Promise<never>(() => undefined);
        }
        return Promise.resolve()
          .then(() => handler(value as Req, asValue))
          .then(
            (data): LocalReply => ({ ok: true, data }),
            (err: unknown): LocalReply => ({ ok: false, error: asPierError(err).toWire() }),
          );
      }
    : undefined;
  return bus.subscribe(
    subject,
    (raw) => {
      if (!answerable(raw)) return;
      const msg = openSealed(bus, ch, raw);
      if (msg === undefined) return;
      const req = accept<Req>(msg, ch.check);
      if (req === undefined) return;
      void Promise.resolve()
        .then(() => handler(req, msg))
        .then(
          (res) => {
            if (msg.reply) bus.publish(msg.reply, encode(res));
          },
          (err: unknown) => {
            if (msg.reply) bus.publish(msg.reply, encode(asPierError(err).toWire()), { headers: { [ERROR_HEADER]: '1' } });
          },
        )
        .catch(() => undefined); // publishing to a closed bus at shutdown: nobody is left to answer
    },
    { local },
  );
}

/** Marks a channel reply that is a failure (`WireError`), not an answer. */
const ERROR_HEADER = 'pier-error';
const checkWireError = compile({ code: { type: 'string', max: 64 }, message: { type: 'string', max: 4096 } });

/** A failure reply, as the error it carries (a garbled one is a 502). */
function replyError(msg: BusMessage): PierError | null {
  if (msg.headers?.[ERROR_HEADER] === undefined) return null;
  const wire = accept<WireError>(msg, checkWireError);
  return wire ? PierError.fromWire(wire) : refusedReply();
}

const unwrap = <Res>(ch: Channel<unknown, Res>, msg: BusMessage): Res | undefined => accept<Res>(msg, ch.replyCheck);

/**
 * One request to whoever answers `subject`; the reply checked (502 when it fails its schema). A
 * sealed channel's request is sealed to its role's anchored key.
 */
export async function askOn<Req, Res>(bus: Bus, ch: Channel<Req, Res>, subject: string, req: Req, timeoutMs = ch.timeoutMs): Promise<Res> {
  const local = ch.shared ? bus.requestLocal?.(subject, req, { timeoutMs }) : undefined;
  if (local) {
    const reply = await local;
    if (!reply.ok) throw PierError.fromWire(reply.error);
    if (ch.replyCheck(reply.data).length > 0) throw refusedReply();
    return reply.data as Res;
  }
  let data = encode(req);
  if (ch.sealed && bus.sealing) {
    const recipient = await bus.sealing.recipientFor(ch.sealed);
    if (!recipient) throw new PierError('UNAVAILABLE', `no anchored ${ch.sealed} key to seal to: give this process the master key or the bus anchors (PIER_BUS_ANCHORS)`);
    data = bus.sealing.sealer.seal(data, recipient, sealedContext(subject));
  }
  const msg = await bus.request(subject, data, { timeoutMs });
  const failure = replyError(msg);
  if (failure) throw failure;
  const res = unwrap(ch, msg);
  if (res === undefined) throw refusedReply();
  return res;
}

/** Scatter-gather: every answer within the deadline (see Bus.requestMany); replies failing their schema are dropped. */
export async function gatherOn<Req, Res>(bus: Bus, ch: Channel<Req, Res>, subject: string, req: Req, options: { timeoutMs?: number; stallMs: number; expected?: number }): Promise<Res[]> {
  const replies = await bus.requestMany(subject, encode(req), { timeoutMs: options.timeoutMs ?? ch.timeoutMs, stallMs: options.stallMs, expected: options.expected });
  return replies
    .filter((m) => m.headers?.[ERROR_HEADER] === undefined)
    .map((m) => unwrap(ch, m))
    .filter((r): r is Res => r !== undefined);
}

export function tellOn<T>(bus: Bus, _sig: Signal<T>, subject: string, value: T): void {
  bus.publish(subject, encode(value));
}

/** Hears `sig` on `subject` (wildcards allowed: the handler gets the subject each message came on). */
export function hearOn<T>(bus: Bus, sig: Signal<T>, subject: string, handler: (value: T, subject: string) => void): Subscription {
  return bus.subscribe(subject, (msg) => {
    const value = accept<T>(msg, sig.check);
    if (value !== undefined) handler(value, msg.subject);
  });
}

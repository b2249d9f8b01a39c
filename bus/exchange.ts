import type { ValidationSchema } from 'fastest-validator';
import type { Headers } from './bus.js';
import { decode, encode } from './codec.js';
import type { SealSpec } from './sealed.js';
import { compile, type Checker } from './validation.js';

/**
 * The one way Pier talks on the bus (docs/architecture.md, "The bus"): every message belongs to an
 * exchange declared in `subjects-*.ts`, and goes through the verbs of `verbs.ts` (serve, ask,
 * gather, tell, hear). An exchange says everything about its messages in one place: where they go,
 * who shares them, what they must look like both ways, what is sealed, how they are encoded, how
 * long an answer may take, and whether one process may pass them by reference.
 *
 * Messages on the wire (`envelope.ts`): a request or a one-way message is the codec's bytes; every
 * answer is `{ok: true, data}` or `{ok: false, error}`; each may carry the wire format's version
 * (the `pier-v` header, absent for version 1). Readers tolerate fields they do not know: schemas
 * are not strict (a process of the next release may add a field), except where a comment says why.
 */
export interface Exchange<Req, Res> {
  /** Its subject; undefined when built at run time (one edge's, one user's): `at(exchange, subject)` names it. */
  readonly subject: string | undefined;
  /** The queue group its servers share (each request reaches one of them); none: every server hears each. */
  readonly queue: string | undefined;
  /** The request (or one-way message) as its receiver takes it. */
  readonly check: Checker;
  /** The answer as its asker takes it (one failing it is a 502); undefined: the answer is not checked. */
  readonly replyCheck: Checker | undefined;
  /** One-way: told and heard, never answered. */
  readonly oneWay: boolean;
  readonly timeoutMs: number;
  /** What of the exchange carries a secret or a grant, and is sealed on a wire (`sealed.ts`). */
  readonly seal: SealSpec | undefined;
  /**
   * Within one process (the in-process bus), the request and the answer are passed by reference,
   * not encoded (`Bus.requestLocal`), and still checked on both sides. Declared only where the
   * request is built afresh for each call, and where the handler neither keeps nor changes it nor
   * answers with anything it keeps (PIER_FREEZE_SHARED=1 in the tests makes a breach throw).
   */
  readonly shared: boolean;
  readonly codec: Codec;
  /** Phantom fields that carry the request and answer types; never set. */
  readonly _req?: Req;
  readonly _res?: Res;
}

/**
 * How a request or one-way message becomes bytes and back. msgpack for all but a byte stream's
 * pieces, whose payload is the bytes themselves (no encoding, no copy) with their fields in headers.
 */
export interface Codec {
  encode(value: unknown): { data: Uint8Array; headers?: Headers };
  decode(data: Uint8Array, headers: Headers | undefined): unknown;
}

export const msgpack: Codec = {
  encode: (value) => ({ data: encode(value) }),
  decode: (data) => decode(data),
};

/** An exchange whose subject is known (declared, or named with `at`). */
export type Addressed<Req, Res> = Exchange<Req, Res> & { readonly subject: string };

export interface ExchangeSpec {
  subject?: string;
  queue?: string;
  request: ValidationSchema;
  reply?: ValidationSchema;
  oneWay?: boolean;
  timeoutMs?: number;
  seal?: SealSpec;
  shared?: boolean;
  codec?: Codec;
}

export function exchange<Req, Res = never>(spec: ExchangeSpec): Exchange<Req, Res> {
  return {
    subject: spec.subject,
    queue: spec.queue,
    check: compile(spec.request),
    replyCheck: spec.reply ? compile(spec.reply) : undefined,
    oneWay: spec.oneWay ?? false,
    timeoutMs: spec.timeoutMs ?? 5_000,
    seal: spec.seal,
    shared: spec.shared ?? false,
    codec: spec.codec ?? msgpack,
  };
}

/** The exchange on a subject built at run time. */
export function at<Req, Res>(ex: Exchange<Req, Res>, subject: string): Addressed<Req, Res> {
  return { ...ex, subject };
}

/** The exchange, its request and answer passed by reference within one process (see `Exchange.shared`). */
export function shared<Req, Res, E extends Exchange<Req, Res>>(ex: E & Exchange<Req, Res>): E {
  return { ...ex, shared: true };
}

// Shorthands for the usual shapes, all of them one Exchange.

/** An actor's request/reply endpoint: one subject, served by a queue group. */
export function endpoint<Req, Res>(subject: string, queue: string, schema: ValidationSchema, timeoutMs = 5_000, seal?: SealSpec): Addressed<Req, Res> {
  return exchange<Req, Res>({ subject, queue, request: schema, timeoutMs, seal }) as Addressed<Req, Res>;
}

/** Request/reply on subjects built at run time, the answer checked too. `sealed`: the request is sealed to that role. */
export function channel<Req, Res>(schema: ValidationSchema, replySchema: ValidationSchema, timeoutMs = 2_000, options: { sealed?: string; shared?: boolean } = {}): Exchange<Req, Res> & { readonly replyCheck: Checker } {
  return exchange<Req, Res>({ request: schema, reply: replySchema, timeoutMs, shared: options.shared, seal: options.sealed ? { request: options.sealed } : undefined }) as Exchange<Req, Res> & { readonly replyCheck: Checker };
}

/** A one-way message every subscriber hears. `signedBy`: signed with that role's anchored key (`SealSpec.signedBy`). */
export function event<T>(subject: string, schema: ValidationSchema, options: { signedBy?: string } = {}): Addressed<T, never> {
  return exchange<T>({ subject, request: schema, oneWay: true, seal: options.signedBy ? { signedBy: options.signedBy } : undefined }) as Addressed<T, never>;
}

/** A one-way message on subjects built at run time. */
export function signal<T>(schema: ValidationSchema): Exchange<T, never> {
  return exchange({ request: schema, oneWay: true });
}

/** Any exchange, whatever its types (tables of them erase the types). */
export type AnyExchange = Exchange<unknown, unknown>;
export type AnyAddressed = Addressed<unknown, unknown>;

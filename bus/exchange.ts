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
  /**
   * Its subject; undefined when built at run time (one edge's, one user's): `at(exchange, subject)`
   * names it, `at(exchange, subjectOf)` declares it from a process's bus id (`ByBusId`).
   */
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

/** An exchange whose answer its asker checks (declared with a `reply` schema). */
export type Answered = { readonly replyCheck: Checker };

/** Declares an exchange; what the spec leaves out takes the defaults below (a 5 s deadline, msgpack, not shared). */
export function exchange<Req, Res = never>(spec: ExchangeSpec & { subject: string; reply: ValidationSchema }): Addressed<Req, Res> & Answered;
export function exchange<Req, Res = never>(spec: ExchangeSpec & { subject: string }): Addressed<Req, Res>;
export function exchange<Req, Res = never>(spec: ExchangeSpec & { reply: ValidationSchema }): Exchange<Req, Res> & Answered;
export function exchange<Req, Res = never>(spec: ExchangeSpec): Exchange<Req, Res>;
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

/**
 * An exchange on subjects built at run time from a process's bus id (`at(exchange, subjectOf)`):
 * in an actor's `serves` and `hears`, this process's own (lib/runtime/actor-declaration.ts); in its `calls` and
 * `emits`, any process's. Its verbs take it once named: `at(exchange, subjectOf(busId))`.
 */
export type ByBusId<Req, Res> = Exchange<Req, Res> & { readonly subject: undefined; readonly subjectOf: (busId: string) => string };

/** An exchange as a declaration names it: on its subject, or on one built from a bus id. */
export type Located<Req, Res> = Addressed<Req, Res> | ByBusId<Req, Res>;

/** The exchange on a subject built at run time. */
export function at<Req, Res>(ex: Exchange<Req, Res>, subject: string): Addressed<Req, Res>;
/** The exchange on the subject `subjectOf` builds from a process's bus id (see `ByBusId`). */
export function at<Req, Res>(ex: Exchange<Req, Res>, subjectOf: (busId: string) => string): ByBusId<Req, Res>;
export function at<Req, Res>(ex: Exchange<Req, Res>, where: string | ((busId: string) => string)): Located<Req, Res> {
  return typeof where === 'string' ? { ...ex, subject: where } : { ...ex, subject: undefined, subjectOf: where };
}

/** What a role's rights name for a declared exchange: its subject, or its subjects for every bus id (`*`). */
export const subjectPattern = (ex: AnyLocated): string => (ex.subject !== undefined ? ex.subject : ex.subjectOf('*'));

/** The exchange, its request and answer passed by reference within one process (see `Exchange.shared`). */
export function shared<Req, Res, E extends Exchange<Req, Res>>(ex: E & Exchange<Req, Res>): E {
  return { ...ex, shared: true };
}

/** Any exchange, whatever its types (tables of them erase the types). */
export type AnyExchange = Exchange<unknown, unknown>;
export type AnyAddressed = Addressed<unknown, unknown>;
export type AnyLocated = Located<unknown, unknown>;

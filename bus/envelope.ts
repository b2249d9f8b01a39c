import type { BusMessage, Headers, Reply } from './message.js';
import { decode, encode } from './codec.js';
import { ErrorReasons, PierError, type WireError } from './errors.js';
import type { Checker } from './validation.js';

/**
 * What every message on the bus looks like around its value (docs/architecture.md, "The bus").
 *
 * - **One answer format**: `{ok: true, data}` or `{ok: false, error: {code, message, data?, reason?}}`,
 *   msgpack, for every exchange. A reader ignores keys it does not know (room for what a later
 *   release adds, a signed grant beside the data say).
 * - **A version slot**: the wire format's version travels in the `pier-v` header; absent means 1.
 *   A sender writes the lowest format that says what it sends (nearly every message is format 1, no
 *   header on the hot path), and what only a later format can say on a subject of its own that only
 *   processes speaking that format serve (`vault.versions`), never where heartbeats claim it is
 *   spoken (a thief of a role's identity can claim anything). A receiver refuses a version it does
 *   not speak, counted, and answers it `unsupported_version`, by name (docs/operations.md,
 *   "Upgrading").
 *
 * Formats: 1, the first; 2 adds the vault operator's operations on versions (`pier.vault.versions`);
 * 3 adds `pier vault rekey` (`pier.vault.rekey`), and says a vault replica seals new values under
 * value keys once every vault replica speaks it (docs/vault.md "Destroyed").
 */
export const WIRE_VERSION: number = 3;
/** The oldest wire format this process reads. */
export const OLDEST_WIRE_VERSION = 1;
export const VERSION_HEADER = 'pier-v';

/** The wire format of a message (NaN when its header is not a version at all). */
export function wireVersionOf(headers: Headers | undefined): number {
  const v = headers?.[VERSION_HEADER];
  if (v === undefined) return 1;
  return /^[1-9]\d{0,5}$/.test(v) ? Number(v) : NaN;
}

/** A message's headers as it leaves in wire format `version`: the slot filled past format 1. */
export function outgoing(headers: Headers | undefined, version = 1): Headers | undefined {
  if (version === 1) return headers;
  return { ...headers, [VERSION_HEADER]: String(version) };
}

/** Whether this process reads a message of this wire format. */
export function speaks(headers: Headers | undefined): boolean {
  const v = wireVersionOf(headers);
  return v >= OLDEST_WIRE_VERSION && v <= WIRE_VERSION;
}

export const unsupportedVersion = (subject: string, headers: Headers | undefined) =>
  new PierError('BAD_REQUEST', `${subject}: wire format ${headers?.[VERSION_HEADER]} is not spoken here (${OLDEST_WIRE_VERSION} to ${WIRE_VERSION})`, { reason: ErrorReasons.UNSUPPORTED_VERSION });

export type { Reply } from './message.js';

/** A reply that cannot be encoded (a handler's bug) still answers: a generic INTERNAL error, never a hang. */
export function encodeReply<Res>(reply: Reply<Res>): Uint8Array {
  try {
    return encode(reply);
  } catch {
    return encode({ ok: false, error: new PierError('INTERNAL', 'internal error').toWire() });
  }
}

const garbled = (subject: string) => new PierError('BAD_GATEWAY', `bus: the answer on ${subject} is not an answer`);

/** An answer's bytes as its value, or the error it carries (thrown); a garbled answer is a 502. */
export function openReply<Res>(subject: string, bytes: Uint8Array, headers: Headers | undefined, replyCheck: Checker | undefined): Res {
  if (!speaks(headers)) throw new PierError('BAD_GATEWAY', `bus: the answer on ${subject} is in wire format ${headers?.[VERSION_HEADER]}, not spoken here`);
  let reply: unknown;
  try {
    reply = decode(bytes);
  } catch (err) {
    throw new PierError('BAD_GATEWAY', `bus: the answer on ${subject} is not valid msgpack`, { cause: err });
  }
  return settle(subject, reply, replyCheck);
}

/** An answer as its value (an in-process one too), or the error it carries. */
export function settle<Res>(subject: string, reply: unknown, replyCheck: Checker | undefined): Res {
  if (typeof reply !== 'object' || reply === null) throw garbled(subject);
  const r = reply as { ok?: unknown; data?: unknown; error?: unknown };
  if (r.ok === true) {
    if (replyCheck && replyCheck(r.data).length > 0) throw new PierError('BAD_GATEWAY', `bus: the answer on ${subject} failed its schema`);
    return r.data as Res;
  }
  const e = r.ok === false ? wireErrorOf(r.error) : undefined;
  if (!e) throw garbled(subject);
  throw PierError.fromWire(e);
}

/** A value as the wire form of an error, when it is one (a code and a bounded message); undefined otherwise. */
export function wireErrorOf(value: unknown): WireError | undefined {
  const e = value as WireError | undefined;
  if (typeof e !== 'object' || e === null || typeof e.code !== 'string' || typeof e.message !== 'string' || e.message.length > 4096) return undefined;
  return e;
}

/** Why a received message was refused before any handler saw it. */
export type RefusalReason = 'undecodable' | 'schema' | 'reply' | 'sealed' | 'version';
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
 * Whether a request may be answered: Pier's requesters always wait on an inbox (`_INBOX.<identity>.…`).
 * A reply subject naming anything else would make the responder publish its answer there with its
 * own rights (NATS `allow_responses`): another role's endpoint, say. Such a request is refused
 * before any handler runs, and counted.
 */
export function answerable(msg: BusMessage): boolean {
  if (msg.reply === undefined || msg.reply.startsWith('_INBOX.')) return true;
  refuse(msg.subject, 'reply');
  return false;
}

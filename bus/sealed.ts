import type { Bus, BusMessage } from './bus.js';
import { decode, encode } from './codec.js';
import { PierError } from './errors.js';
import { isPublicKey } from './seal.js';

/**
 * Which part of an endpoint's exchange is sealed on a wire (CONTRACT.md section 9): `request` names
 * the role whose key opens the request (every replica of that role holds it, so the queue group
 * may pick any), `reply` seals the answer to the key the caller sends along. On the in-process
 * bus (`bus.sealing` absent) both travel as they are: nothing crosses a wire there.
 */
export interface SealSpec {
  request?: string;
  reply?: boolean;
}

/**
 * A request whose answer is sealed starts with the caller's public key (32 raw bytes), which the
 * answer is sealed to; the request itself follows (sealed or not). Not a header: NATS headers cost
 * an encoding and a parse on every request, and this is the hot path of every vault read.
 */
const KEY_BYTES = 32;

interface Sealable {
  readonly subject: string;
  readonly seal?: SealSpec;
}

// The additional data of each box: a box opens only as what it was made for. A sealed request
// binds the reply key too, so nobody can replay it with a key of their own.
const requestContext = (subject: string, replyKey: string | undefined) => `${subject}|request|${replyKey ?? ''}`;
const replyContext = (subject: string) => `${subject}|reply`;

/** The caller's side: the request's bytes, sealed to the role when declared so, after the reply key when the answer is sealed. */
export async function sealRequest(bus: Bus, ep: Sealable, plain: Uint8Array): Promise<Uint8Array> {
  const sealing = bus.sealing;
  if (!sealing || !ep.seal) return plain;
  const replyKey = ep.seal.reply ? sealing.sealer.self : undefined;
  let body = plain;
  if (ep.seal.request) {
    const to = await sealing.recipientFor(ep.seal.request);
    if (!to) throw new PierError('UNAVAILABLE', `no key to seal to: no ${ep.seal.request} replica has announced itself yet, or they announce no key in common`);
    body = sealing.sealer.seal(plain, to, requestContext(ep.subject, replyKey?.publicKey));
  }
  return replyKey ? Buffer.concat([replyKey.raw, body]) : body;
}

/** The reply key a responder must seal its answer to, when the endpoint says so (undefined otherwise, or when absent). */
export function replyKeyOf(bus: Bus, ep: Sealable, msg: BusMessage): string | undefined {
  if (!bus.sealing || !ep.seal?.reply || msg.data.byteLength < KEY_BYTES) return undefined;
  return Buffer.from(msg.data.buffer, msg.data.byteOffset, KEY_BYTES).toString('base64url');
}

/** The responder's side: the request's plain bytes. Throws BAD_REQUEST for what must be sealed and is not, or does not open. */
export function openRequest(bus: Bus, ep: Sealable, msg: BusMessage, replyKey: string | undefined): Uint8Array {
  const sealing = bus.sealing;
  if (!sealing || !ep.seal) return msg.data;
  if (ep.seal.reply && !isPublicKey(replyKey)) throw new PierError('BAD_REQUEST', `sealed message: ${ep.subject} needs the caller's key first`);
  const body = ep.seal.reply ? msg.data.subarray(KEY_BYTES) : msg.data;
  if (!ep.seal.request) return body;
  return sealing.sealer.open(body, requestContext(ep.subject, replyKey), sealing.roleKeys(ep.seal.request)).plain;
}

/**
 * The responder's answer, sealed to the caller's key when declared so. Without a valid key only a
 * refusal goes back (in clear: it carries no secret), never an answer.
 */
export function sealReply(bus: Bus, ep: Sealable, replyKey: string | undefined, ok: boolean, plain: Uint8Array): Uint8Array {
  const sealing = bus.sealing;
  if (!sealing || !ep.seal?.reply) return plain;
  if (isPublicKey(replyKey)) return sealing.sealer.seal(plain, replyKey, replyContext(ep.subject));
  return ok ? encode({ ok: false, error: new PierError('BAD_REQUEST', 'sealed message: no reply key').toWire() }) : plain;
}

/** The caller's side: the reply's plain bytes. A sealed endpoint's answer in clear is refused (only a refusal may be). */
export function openReply(bus: Bus, ep: Sealable, msg: BusMessage): Uint8Array {
  const sealing = bus.sealing;
  if (!sealing || !ep.seal?.reply) return msg.data;
  if (msg.data[0] === 1) return sealing.sealer.open(msg.data, replyContext(ep.subject)).plain;
  let plain: { ok?: unknown } | undefined;
  try {
    plain = decode<{ ok?: unknown }>(msg.data);
  } catch {
    plain = undefined;
  }
  if (plain?.ok === false) return msg.data;
  throw new PierError('BAD_GATEWAY', `sealed message: the answer on ${ep.subject} came in clear`);
}

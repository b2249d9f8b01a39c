import type { Bus, BusMessage } from './bus.js';
import { refuse } from './envelope.js';
import { decode, encode } from './codec.js';
import { PierError } from './errors.js';
import { isPublicKey } from './seal.js';
import { pooledRandom } from './random-pool.js';

/**
 * Which part of an endpoint's exchange is sealed on a wire, and to which key (docs/security.md,
 * "Keys with an anchor"). On the in-process bus (`bus.sealing` absent) everything travels as it
 * is: nothing crosses a wire there.
 */
export interface SealSpec {
  /** The role whose anchored key opens the request (every replica of that role holds it, so the queue group may pick any). */
  request?: string;
  /**
   * Only this role may ask: the request is sealed *from* its anchored key (with `request`), and a
   * request made with any other key is refused before its handler runs. For what only the operator
   * may do (`admin`): holding the admin identity's `.nats.env` is not enough.
   */
  from?: string;
  /** The answer is sealed to the caller's own key, sent along with the request. */
  reply?: boolean;
  /**
   * The answer is sealed to this role's anchored key, whoever asked: a secret only that role may
   * hold (an app secret for `token`). The caller sends its role key; any other key is refused.
   */
  replyTo?: string;
  /**
   * The answer grants something (a pass, credentials, a snapshot): it is sealed *from* this role's
   * anchored key and bound to the request, and the caller refuses an answer made with any other
   * key. Only a refusal may come in clear: it grants nothing.
   */
  grant?: string;
  /**
   * One-way messages only: signed with this role's anchored Ed25519 key, and refused unsigned or
   * signed by any other key. For what every process believes (the registry's changes), which only
   * that role may say.
   */
  signedBy?: string;
}

/**
 * A request whose answer is sealed starts with the key the answer is sealed to (32 raw bytes) and
 * a fresh nonce (16) the answer is bound to, so an answer cannot be replayed to another request;
 * the request itself follows (sealed or not). Not a header: NATS headers cost an encoding and a
 * parse on every request, and this is the hot path of every vault read.
 */
const KEY_BYTES = 32;
const NONCE_BYTES = 16;
const PREFIX_BYTES = KEY_BYTES + NONCE_BYTES;

/** What sealing needs to know of an exchange: its spec and the concrete subject a message goes on. */
interface Sealable {
  readonly subject: string;
  readonly seal: SealSpec | undefined;
}

/**
 * A request's nonce: random, so nobody can ask ahead of time for the answer to a request a process
 * has not made yet (a thief that sees a counter could have a real grant made for the next one, and
 * play it back later). Taken from the process's pool (random-pool.ts): `randomFillSync`
 * per request was a call into OpenSSL costing tens of microseconds on every vault read.
 */
function nextNonce(into: Buffer, at: number): void {
  pooledRandom(NONCE_BYTES).copy(into, at);
}

const answerSealed = (spec: SealSpec | undefined) => spec !== undefined && (spec.reply === true || spec.replyTo !== undefined || spec.grant !== undefined);

// The additional data of each box: a box opens only as what it was made for. A sealed request
// binds the reply key and the nonce too, so nobody can replay it with a key of their own.
// A context bound to one request is bytes (the subject's part, then the request's own bytes): unique, never cached.
const heads = new Map<string, Buffer>();
const head = (text: string) => {
  let b = heads.get(text);
  if (!b) {
    // Endpoint subjects are declared, a bounded few; the bound only guards against a bug.
    if (heads.size >= 1_024) heads.clear();
    heads.set(text, (b = Buffer.from(text)));
  }
  return b;
};
const requestContext = (subject: string, prefix: Uint8Array | undefined): string | Buffer => (prefix ? Buffer.concat([head(`${subject}|request|`), prefix]) : `${subject}|request|`);
const replyContext = (subject: string, nonce: Uint8Array): Buffer => Buffer.concat([head(`${subject}|reply|`), nonce]);

/** What a caller keeps of its sealed request to open the answer with. */
export interface SealedCall {
  data: Uint8Array;
  nonce?: Uint8Array;
}

/** The caller's side: the request's bytes, sealed to the role when declared so, after the reply key and nonce when the answer is sealed. */
export async function sealRequest(bus: Bus, ep: Sealable, plain: Uint8Array): Promise<SealedCall> {
  const sealing = bus.sealing;
  const spec = ep.seal;
  if (!sealing || !spec) return { data: plain };
  let prefix: Buffer | undefined;
  if (answerSealed(spec)) {
    const replyKey = spec.replyTo ? sealing.roleKeys(spec.replyTo)[0] : sealing.sealer.self;
    if (!replyKey) throw new PierError('INTERNAL', `${ep.subject}: this process does not hold the ${spec.replyTo} key its answer is sealed to`);
    prefix = Buffer.allocUnsafe(PREFIX_BYTES);
    replyKey.raw.copy(prefix, 0);
    nextNonce(prefix, KEY_BYTES);
  }
  let body = plain;
  if (spec.request) {
    const to = await sealing.recipientFor(spec.request);
    if (!to) throw new PierError('UNAVAILABLE', `no anchored ${spec.request} key to seal to: give this process the master key or the bus anchors (PIER_BUS_ANCHORS)`);
    const from = spec.from ? sealing.roleKeys(spec.from)[0] : sealing.sealer.self;
    if (!from) throw new PierError('UNAVAILABLE', `${ep.subject}: only the ${spec.from} role may ask, with its key, which this process does not hold (the master key, or PIER_${(spec.from ?? '').toUpperCase()}_KEY)`);
    body = sealing.sealer.seal(plain, to, requestContext(ep.subject, prefix), from);
  }
  return prefix ? { data: Buffer.concat([prefix, body]), nonce: prefix.subarray(KEY_BYTES) } : { data: body };
}

/** The reply key and nonce a responder must seal its answer to, when the endpoint says so (undefined otherwise, or when absent). */
export function replyKeyOf(bus: Bus, ep: Sealable, msg: BusMessage): Uint8Array | undefined {
  if (!bus.sealing || !answerSealed(ep.seal) || msg.data.byteLength < PREFIX_BYTES) return undefined;
  return msg.data.subarray(0, PREFIX_BYTES);
}

/** The responder's side: the request's plain bytes. Throws BAD_REQUEST for what must be sealed and is not, or does not open. */
export function openRequest(bus: Bus, ep: Sealable, msg: BusMessage, prefix: Uint8Array | undefined): Uint8Array {
  const sealing = bus.sealing;
  const spec = ep.seal;
  if (!sealing || !spec) return msg.data;
  if (answerSealed(spec) && prefix === undefined) throw new PierError('BAD_REQUEST', `sealed message: ${ep.subject} needs the caller's key first`);
  const body = prefix ? msg.data.subarray(PREFIX_BYTES) : msg.data;
  if (!spec.request) return body;
  const { plain, sender } = sealing.sealer.open(body, requestContext(ep.subject, prefix), sealing.roleKeys(spec.request));
  if (spec.from && !sealing.isAnchored(spec.from, sender)) throw new PierError('FORBIDDEN', `sealed message: ${ep.subject} takes requests only made with an anchored ${spec.from} key`);
  return plain;
}

/**
 * The responder's answer, sealed when declared so: to the caller's key (or, for `replyTo`, only to
 * an anchored key of that role), from the role's anchored key for a grant. Without a key it may
 * seal to, only a refusal goes back (in clear: it carries no secret), never an answer.
 */
export function sealReply(bus: Bus, ep: Sealable, prefix: Uint8Array | undefined, ok: boolean, plain: Uint8Array): Uint8Array {
  const sealing = bus.sealing;
  const spec = ep.seal;
  if (!sealing || !answerSealed(spec)) return plain;
  const refusal = (message: string) => encode({ ok: false, error: new PierError('BAD_REQUEST', `sealed message: ${message}`).toWire() });
  if (prefix === undefined) return ok ? refusal('no reply key') : plain;
  const key = Buffer.from(prefix.buffer, prefix.byteOffset, KEY_BYTES).toString('base64url');
  if (!isPublicKey(key)) return ok ? refusal('no reply key') : plain;
  if (spec!.replyTo && !sealing.isAnchored(spec!.replyTo, key)) return refusal(`the answer on ${ep.subject} is sealed only to an anchored ${spec!.replyTo} key`);
  const from = spec!.grant ? sealing.roleKeys(spec!.grant)[0] : sealing.sealer.self;
  if (!from) return encode({ ok: false, error: new PierError('UNAVAILABLE', `this process does not hold the ${spec!.grant} key`).toWire() });
  return sealing.sealer.seal(plain, key, replyContext(ep.subject, prefix.subarray(KEY_BYTES)), from);
}

/**
 * The caller's side: the reply's plain bytes. A sealed endpoint's answer in clear is refused (only
 * a refusal may be), and a grant made with a key that is not the role's anchored one too.
 */
export function openSealedReply(bus: Bus, ep: Sealable, msg: BusMessage, call: SealedCall): Uint8Array {
  const sealing = bus.sealing;
  const spec = ep.seal;
  if (!sealing || !answerSealed(spec) || !call.nonce) return msg.data;
  if (msg.data[0] === 1) {
    const own = spec!.replyTo ? sealing.roleKeys(spec!.replyTo) : [sealing.sealer.self];
    const { plain, sender } = sealing.sealer.open(msg.data, replyContext(ep.subject, call.nonce), own);
    if (spec!.grant && !sealing.isAnchored(spec!.grant, sender)) throw new PierError('BAD_GATEWAY', `sealed message: the answer on ${ep.subject} is not from an anchored ${spec!.grant} key`);
    return plain;
  }
  let plain: { ok?: unknown } | undefined;
  try {
    plain = decode<{ ok?: unknown }>(msg.data);
  } catch {
    plain = undefined;
  }
  if (plain?.ok === false) return msg.data;
  throw new PierError('BAD_GATEWAY', `sealed message: the answer on ${ep.subject} came in clear`);
}

/** An Ed25519 signature, then the message: what a signed one-way message is on a wire. */
const SIGNATURE_BYTES = 64;
const signedPart = (subject: string, payload: Uint8Array) => Buffer.concat([head(`${subject}|`), payload]);

/** A one-way message's bytes as they leave: signed when its exchange says so. */
export function signMessage(bus: Bus, ex: Sealable, payload: Uint8Array): Uint8Array {
  const by = ex.seal?.signedBy;
  if (!by || !bus.sealing) return payload;
  const sig = bus.sealing.signAs(by, signedPart(ex.subject, payload));
  if (!sig) throw new PierError('INTERNAL', `${ex.subject}: this process does not hold the ${by} key to sign with`);
  return Buffer.concat([sig, payload]);
}

/** A signed one-way message's payload, when its signature is by the role's anchored key; undefined (refused, counted) otherwise. */
export function verifiedMessage(bus: Bus, seal: SealSpec | undefined, msg: BusMessage): Uint8Array | undefined {
  const by = seal?.signedBy;
  if (!by || !bus.sealing) return msg.data;
  const payload = msg.data.subarray(SIGNATURE_BYTES);
  if (msg.data.byteLength > SIGNATURE_BYTES && bus.sealing.signedAs(by, signedPart(msg.subject, payload), msg.data.subarray(0, SIGNATURE_BYTES))) return payload;
  refuse(msg.subject, 'sealed');
  return undefined;
}

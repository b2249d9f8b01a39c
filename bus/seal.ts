import { createCipheriv, createDecipheriv, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import { PierError } from './errors.js';

/**
 * Sealed boxes: how a secret crosses the bus readable only by the one process (or role) it is
 * meant for (docs/security.md "The bus"). Every process has an X25519 key pair, made at start; the roles
 * whose replicas must all open what is sent to the role (vault, registry, token, provider: a queue
 * group picks the replica) also share a role key pair derived from the master key. Public keys are
 * announced in heartbeats, on subjects only the role's identity may publish.
 *
 * A box is `1 | sender public key (32) | nonce (12) | AES-256-GCM ciphertext | tag (16)`, the key
 * being HKDF-SHA256 of the X25519 agreement between the sender's and the recipient's static keys
 * (cached per pair, so a message costs one AES-GCM pass), and the additional data the context the
 * box was made for (the subject and direction, and the key a reply must be sealed to): a box lifted
 * into another message does not open. Static-static agreement gives no forward secrecy; what it
 * guards against is a reader of the bus (a stolen identity of another role, a tap on a route), and
 * a process's keys live only as long as the process.
 */

const VERSION = 1;
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + KEY_BYTES + NONCE_BYTES;
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const PUBLIC_KEY = /^[A-Za-z0-9_-]{43}$/;

export const isPublicKey = (s: unknown): s is string => typeof s === 'string' && PUBLIC_KEY.test(s);

/** An X25519 key pair; `publicKey` is the raw 32 bytes in base64url (as announced). */
export class KeyPair {
  /** The public key's raw 32 bytes (what a box carries). */
  readonly raw: Buffer;

  private constructor(
    readonly privateKey: KeyObject,
    readonly publicKey: string,
  ) {
    this.raw = Buffer.from(publicKey, 'base64url');
  }

  static generate(): KeyPair {
    const { privateKey, publicKey } = generateKeyPairSync('x25519');
    return new KeyPair(privateKey, publicKey.export({ format: 'jwk' }).x!);
  }

  /** The same pair from the same 32 bytes (a role key derived from the master key). */
  static fromSeed(seed: Uint8Array): KeyPair {
    if (seed.byteLength !== KEY_BYTES) throw new Error('a key seed is 32 bytes');
    const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_X25519, seed]), format: 'der', type: 'pkcs8' });
    return new KeyPair(privateKey, createPublicKey(privateKey).export({ format: 'jwk' }).x!);
  }
}

const sealError = (message: string) => new PierError('BAD_REQUEST', `sealed message: ${message}`);

/** Opens and makes boxes for one process, with a bounded cache of agreed keys. */
export class Sealer {
  private readonly agreed = new Map<string, Buffer>();
  private readonly contexts = new Map<string, Buffer>();
  /**
   * Nonces: a random prefix per process and a counter, never a repeat under one key. The two ends of
   * a pair share its key, so the first byte also says which end sealed (it orders the public keys).
   */
  private readonly noncePrefix = randomBytes(3);
  private counter = 0n;

  constructor(
    readonly self: KeyPair,
    private readonly maxCached = 4_096,
  ) {}

  seal(plain: Uint8Array, recipient: string, context: string | Buffer, from: KeyPair = this.self): Uint8Array {
    if (!isPublicKey(recipient)) throw sealError('no valid recipient key');
    const out = Buffer.allocUnsafe(HEADER_BYTES + plain.byteLength + TAG_BYTES);
    out[0] = VERSION;
    from.raw.copy(out, 1);
    const nonce = out.subarray(1 + KEY_BYTES, HEADER_BYTES);
    nonce[0] = from.publicKey < recipient ? 0 : 1;
    this.noncePrefix.copy(nonce, 1);
    nonce.writeBigUInt64BE(this.counter++, 4);
    const cipher = createCipheriv('aes-256-gcm', this.keyFor(from, recipient), nonce);
    cipher.setAAD(this.aad(context));
    const body = cipher.update(plain);
    body.copy(out, HEADER_BYTES);
    const tail = cipher.final();
    if (tail.byteLength > 0) tail.copy(out, HEADER_BYTES + body.byteLength);
    cipher.getAuthTag().copy(out, HEADER_BYTES + plain.byteLength);
    return out;
  }

  /** Opens `box` with the first of `own` it was sealed to; the sender's public key comes back too. */
  open(box: Uint8Array, context: string | Buffer, own: readonly KeyPair[] = [this.self]): { plain: Buffer; sender: string } {
    if (!(box instanceof Uint8Array) || box.byteLength < HEADER_BYTES + TAG_BYTES || box[0] !== VERSION) throw sealError('not a sealed box');
    const bytes = Buffer.from(box.buffer, box.byteOffset, box.byteLength);
    const sender = bytes.subarray(1, 1 + KEY_BYTES).toString('base64url');
    const nonce = bytes.subarray(1 + KEY_BYTES, HEADER_BYTES);
    const body = bytes.subarray(HEADER_BYTES, bytes.byteLength - TAG_BYTES);
    const tag = bytes.subarray(bytes.byteLength - TAG_BYTES);
    for (const key of own) {
      try {
        const decipher = createDecipheriv('aes-256-gcm', this.keyFor(key, sender), nonce);
        decipher.setAAD(this.aad(context));
        decipher.setAuthTag(tag);
        return { plain: Buffer.concat([decipher.update(body), decipher.final()]), sender };
      } catch {
        // not sealed to this key (or altered): try the next
      }
    }
    throw sealError('it does not open with the keys of this process (altered, or sealed to another key)');
  }

  /**
   * Contexts named by a string are a handful (a subject and a direction): kept as bytes. One bound
   * to a request (its nonce) is unique: given as bytes, used once, never kept.
   */
  private aad(context: string | Buffer): Buffer {
    if (typeof context !== 'string') return context;
    let b = this.contexts.get(context);
    if (!b) {
      b = Buffer.from(context);
      if (this.contexts.size >= this.maxCached) this.contexts.delete(this.contexts.keys().next().value!);
      this.contexts.set(context, b);
    }
    return b;
  }

  private keyFor(own: KeyPair, peer: string): Buffer {
    const id = `${own.publicKey}|${peer}`;
    let key = this.agreed.get(id);
    if (key) return key;
    let shared: Buffer;
    try {
      shared = diffieHellman({ privateKey: own.privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: peer }, format: 'jwk' }) });
    } catch {
      throw sealError('the peer key is not an X25519 public key');
    }
    // Both ends derive the same key: the two public keys enter in a fixed order.
    const [a, b] = [own.publicKey, peer].sort();
    key = Buffer.from(hkdfSync('sha256', shared, Buffer.alloc(0), `pier bus seal v1|${a}|${b}`, KEY_BYTES));
    if (this.agreed.size >= this.maxCached) this.agreed.delete(this.agreed.keys().next().value!);
    this.agreed.set(id, key);
    return key;
  }
}

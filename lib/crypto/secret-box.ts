import { createCipheriv, createDecipheriv } from 'node:crypto';
import { pooledRandom } from '../../bus/random-pool.js';
import { PierError } from '../../bus/errors.js';

const VERSION = 1;
/** A box sealed under a key of its own, named in the box (docs/vault.md "Destroyed"). */
const VERSION_KEYED = 2;
const NONCE = 12;
const TAG = 16;
/** The length of a keyed box's key id. */
export const KEY_ID_BYTES = 16;

/**
 * AES-256-GCM with a random nonce. `context` is bound as associated data: a sealed value copied
 * to another record (another context) fails to open. Layout: version | nonce | tag | ciphertext.
 */
export function seal(key: Buffer, plaintext: Buffer, context: string): Buffer {
  return Buffer.concat([Buffer.from([VERSION]), body(key, plaintext, context)]);
}

/**
 * `seal` under a key of its own, whose id travels in the box (version 2: version | key id | nonce
 * | tag | ciphertext), so every copy of the box names the key that opens it, and erasing that key
 * erases every copy at once.
 */
export function sealKeyed(key: Buffer, keyId: Buffer, plaintext: Buffer, context: string): Buffer {
  if (keyId.length !== KEY_ID_BYTES) throw new TypeError(`key id must be ${KEY_ID_BYTES} bytes`);
  return Buffer.concat([Buffer.from([VERSION_KEYED]), keyId, body(key, plaintext, context)]);
}

function body(key: Buffer, plaintext: Buffer, context: string): Buffer {
  if (key.length !== 32) throw new TypeError('key must be 32 bytes');
  const nonce = pooledRandom(NONCE);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, cipher.getAuthTag(), ciphertext]);
}

/** The id (hex) of the key a box is sealed under, or undefined when it is sealed with `seal`. */
export function keyIdOf(sealed: Uint8Array): string | undefined {
  if (sealed[0] !== VERSION_KEYED || sealed.byteLength < 1 + KEY_ID_BYTES) return undefined;
  return Buffer.from(sealed.buffer, sealed.byteOffset + 1, KEY_ID_BYTES).toString('hex');
}

/** Bytes a box adds to what it seals. */
const overhead = (sealed: Uint8Array) => 1 + NONCE + TAG + (sealed[0] === VERSION_KEYED ? KEY_ID_BYTES : 0);

/** The size of what a box seals. */
export const plaintextSize = (sealed: Uint8Array): number => Math.max(0, sealed.byteLength - overhead(sealed));

export function open(key: Buffer, sealed: Uint8Array, context: string): Buffer {
  const box = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if ((box[0] !== VERSION && box[0] !== VERSION_KEYED) || box.length < overhead(box)) throw new PierError('INTERNAL', 'sealed value is malformed');
  const at = box[0] === VERSION_KEYED ? 1 + KEY_ID_BYTES : 1;
  const decipher = createDecipheriv('aes-256-gcm', key, box.subarray(at, at + NONCE));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(box.subarray(at + NONCE, at + NONCE + TAG));
  try {
    return Buffer.concat([decipher.update(box.subarray(at + NONCE + TAG)), decipher.final()]);
  } catch (err) {
    throw new PierError('INTERNAL', 'sealed value failed authentication', { cause: err });
  }
}

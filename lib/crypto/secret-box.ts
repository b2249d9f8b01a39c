import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';

const VERSION = 1;
const NONCE = 12;
const TAG = 16;

/**
 * AES-256-GCM with a random nonce. `context` is bound as associated data: a sealed value copied
 * to another record (another context) fails to open. Layout: version | nonce | tag | ciphertext.
 */
export function seal(key: Buffer, plaintext: Buffer, context: string): Buffer {
  if (key.length !== 32) throw new TypeError('key must be 32 bytes');
  const nonce = randomBytes(NONCE);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(context));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), nonce, cipher.getAuthTag(), body]);
}

export function open(key: Buffer, sealed: Uint8Array, context: string): Buffer {
  const box = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  if (box.length < 1 + NONCE + TAG || box[0] !== VERSION) throw new PierError('INTERNAL', 'sealed value is malformed');
  const decipher = createDecipheriv('aes-256-gcm', key, box.subarray(1, 1 + NONCE));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(box.subarray(1 + NONCE, 1 + NONCE + TAG));
  try {
    return Buffer.concat([decipher.update(box.subarray(1 + NONCE + TAG)), decipher.final()]);
  } catch (err) {
    throw new PierError('INTERNAL', 'sealed value failed authentication', { cause: err });
  }
}

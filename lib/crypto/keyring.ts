import { createHash } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import { open, seal } from './secret-box.js';

const ID_BYTES = 8;

function keyId(key: Buffer): Buffer {
  return createHash('sha256').update('pier master key id').update(key).digest().subarray(0, ID_BYTES);
}

/**
 * The master key, and during a rotation the previous one. Values sealed with it carry the id of
 * the key that sealed them, so they open under either key until they are re-sealed under the
 * current one (`pier vault rotate-master-key`). The keys themselves never enter a database.
 */
export class Keyring {
  private readonly currentId: Buffer;
  private readonly previousId: Buffer | null;

  constructor(
    readonly current: Buffer,
    readonly previous: Buffer | null = null,
  ) {
    this.currentId = keyId(current);
    this.previousId = previous ? keyId(previous) : null;
  }

  seal(plaintext: Buffer, context: string): Buffer {
    return Buffer.concat([this.currentId, seal(this.current, plaintext, context)]);
  }

  open(sealed: Uint8Array, context: string): Buffer {
    const box = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    const id = box.subarray(0, ID_BYTES);
    const key = id.equals(this.currentId) ? this.current : this.previousId && id.equals(this.previousId) ? this.previous : null;
    if (!key) throw new PierError('INTERNAL', 'sealed under a master key this process does not have');
    return open(key, box.subarray(ID_BYTES), context);
  }

  /** True when `sealed` was sealed under the current or the previous key: one this process can open. */
  knows(sealed: Uint8Array): boolean {
    if (sealed.byteLength < ID_BYTES) return false;
    const id = Buffer.from(sealed.buffer, sealed.byteOffset, ID_BYTES);
    return id.equals(this.currentId) || (this.previousId !== null && id.equals(this.previousId));
  }

  /** True when `sealed` was not sealed under the current key. */
  isStale(sealed: Uint8Array): boolean {
    return !Buffer.from(sealed.buffer, sealed.byteOffset, ID_BYTES).equals(this.currentId);
  }
}

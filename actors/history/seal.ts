import { createCipheriv, createDecipheriv, createHash } from 'node:crypto';
import { pooledRandom } from '../../bus/random-pool.js';

const FORMAT = 1;
const ID_BYTES = 4;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals what apps send to users before it is kept (docs/gateway.md "History and recovery"): AES-256-GCM
 * under the history key, bound (additional data) to the chain and the position it is kept at, so a
 * sealed message moved to another user's history, or to another place in its own, does not open.
 * Sealed under the current key; opened with whichever key (current or previous) its id names.
 */
export class HistorySeal {
  private readonly keys: Array<{ id: Buffer; key: Buffer }>;

  /** `keys`: 32 bytes each, the current first. */
  constructor(keys: readonly Buffer[]) {
    if (keys.length === 0 || keys.some((k) => k.length !== 32)) throw new Error('history keys: one or two keys of 32 bytes');
    this.keys = keys.map((key) => ({ key, id: createHash('sha256').update(key).digest().subarray(0, ID_BYTES) }));
  }

  seal(text: string, bound: string): Buffer {
    const { id, key } = this.keys[0]!;
    const iv = pooledRandom(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(bound));
    const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT]), id, iv, cipher.getAuthTag(), body]);
  }

  /** The text, or null when the box does not open (another key, another place, damaged). */
  open(box: Uint8Array, bound: string): string | null {
    const b = Buffer.from(box.buffer, box.byteOffset, box.byteLength);
    if (b.length < 1 + ID_BYTES + IV_BYTES + TAG_BYTES || b[0] !== FORMAT) return null;
    const id = b.subarray(1, 1 + ID_BYTES);
    const entry = this.keys.find((k) => k.id.equals(id));
    if (!entry) return null;
    try {
      const decipher = createDecipheriv('aes-256-gcm', entry.key, b.subarray(1 + ID_BYTES, 1 + ID_BYTES + IV_BYTES));
      decipher.setAAD(Buffer.from(bound));
      decipher.setAuthTag(b.subarray(1 + ID_BYTES + IV_BYTES, 1 + ID_BYTES + IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(b.subarray(1 + ID_BYTES + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      return null;
    }
  }
}

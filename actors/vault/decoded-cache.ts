import type { Database } from 'lmdb';
import { freezeDeep } from '../../bus/freeze.js';

/**
 * Records decoded from LMDB, each kept beside the stored bytes it came from. A read asks LMDB for
 * the bytes alone (no decode, no copy), and answers the kept record only while they are the same:
 * whoever wrote since, this process or another on the same environment, is seen at once. What it
 * saves is msgpack's decode and its copy of the sealed value, per read of a hot secret.
 * Answers are frozen: they are shared by every read until the record changes.
 */
export class DecodedCache<T extends object> {
  private readonly entries = new Map<string, { raw: Buffer; value: T }>();

  constructor(
    private readonly db: Database<T, string>,
    /** Bound on kept records; past it, the oldest go. */
    private readonly maxEntries = 1_024,
    /** Records larger than this are decoded on every read, never kept (the bound is entries × this, twice). */
    private readonly maxRecordBytes = 4_096,
  ) {}

  get(key: string): T | undefined {
    const raw = this.db.getBinaryFast(key);
    if (raw === undefined) {
      this.entries.delete(key);
      return undefined;
    }
    // lmdb-js answers a view of its one shared read buffer, valid until its next read, with its
    // `length` set to the record's (the view itself spans the whole buffer): a view of the record alone.
    const bytes = new Uint8Array(raw.buffer, raw.byteOffset, raw.length);
    const kept = this.entries.get(key);
    if (kept && kept.raw.equals(bytes)) return kept.value;
    // Its own memory, not a slice of Node's shared 8 KiB pool (which a kept slice would hold whole).
    let copy: Buffer | null = null;
    if (bytes.byteLength <= this.maxRecordBytes) (copy = Buffer.allocUnsafeSlow(bytes.byteLength)).set(bytes);
    // Same read snapshot as the bytes above (lmdb-js renews it on a later turn only).
    const value = this.db.get(key);
    if (value === undefined || copy === null) {
      this.entries.delete(key);
      return value;
    }
    if (!kept && this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    freezeDeep(value);
    this.entries.set(key, { raw: copy, value });
    return value;
  }

  /**
   * A change this process makes, through the cache: what is kept of the key goes at once (and with
   * it whatever was derived from the kept record, such as a value opened from it), not at the key's
   * next read. Another process's change is seen at the next read.
   */
  put(key: string, value: T): void {
    this.entries.delete(key);
    void this.db.put(key, value);
  }

  remove(key: string): void {
    this.entries.delete(key);
    void this.db.remove(key);
  }

  get size(): number {
    return this.entries.size;
  }
}

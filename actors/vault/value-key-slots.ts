import { closeSync, constants, fdatasync, fdatasyncSync, openSync, readSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { fsyncDir } from '../../lib/state/durable-files.js';
import type { Database, RootDatabase } from 'lmdb';
import { durably } from '../../lib/state/lmdb-durable.js';
import type { ValueKeyRecord } from './store.js';

/** One slot: magic | key id (16) | length (1) | wrapped key | zeros | written at (ms, 8). Fixed, so a slot is overwritten in place. */
export const SLOT_BYTES = 128;
const AT = SLOT_BYTES - 8;
const MAGIC = Buffer.from('PVK1');
const ID_BYTES = 16;
const HEADER = MAGIC.length + ID_BYTES + 1;
const ZEROS = Buffer.alloc(SLOT_BYTES);
/** Keys reserved and not yet used remembered (a write uses its own within milliseconds). */
const RESERVED_MAX = 4_096;
/** Slots remembered by `get` (a wrapped key each: under 100 bytes). */
const HELD_MAX = 4_096;

/**
 * Value keys on LMDB (docs/vault.md "Destroyed"), in a file of fixed-size slots beside the
 * environment, never in LMDB itself: LMDB copies a changed page and frees the old one, so a key
 * removed there stays readable until the page is reused. A slot is overwritten with zeros and
 * synced instead, before the destroy that erased it is answered.
 *
 * LMDB keeps which slot holds which key (`value-key-slots`), which slots are free, and which were
 * erased but not yet zeroed (`value-key-erasing`): a slot is zeroed and freed in one write
 * transaction, and taken in another, so replicas sharing the environment (and the file) never
 * zero a slot another has reused (LMDB's write lock orders them). A slot an erasure left unzeroed
 * (a crash between the commit and the zeroing) is zeroed at the next open.
 */
export class ValueKeySlots {
  private readonly index: Database<number, string>;
  private readonly free: Database<number, number>;
  private readonly erasing: Database<string, number>;
  private readonly meta: Database<number, string>;
  private readonly fd: number;
  /** Slots written in the write transaction running now: synced before it commits. */
  private written = false;
  /**
   * What slots hold, by key id, as last read: a read checks the index (a memory-mapped LMDB read)
   * and reads the file only when the key's slot is not the one remembered. An erased key leaves the
   * index in the erasure's commit, so it is never answered from here afterwards.
   */
  private readonly held = new Map<string, { slot: number; record: ValueKeyRecord }>();

  constructor(
    private readonly root: RootDatabase,
    file: string,
  ) {
    this.index = root.openDB<number, string>({ name: 'value-key-slots' });
    this.free = root.openDB<number, number>({ name: 'value-key-free' });
    this.erasing = root.openDB<string, number>({ name: 'value-key-erasing' });
    this.meta = root.openDB<number, string>({ name: 'value-key-meta' });
    this.fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600);
    // Its name is on disk before a key is written to it (a power cut must not lose the file whole).
    fsyncDir(dirname(file));
  }

  /** The key with this id, read from its slot; undefined once erased. */
  get(id: string): ValueKeyRecord | undefined {
    const slot = this.index.get(id);
    if (slot === undefined) {
      this.held.delete(id);
      return undefined;
    }
    const known = this.held.get(id);
    if (known?.slot === slot) return known.record;
    const record = this.read(slot, id);
    if (record) {
      this.held.set(id, { slot, record });
      if (this.held.size > HELD_MAX) this.held.delete(this.held.keys().next().value!);
    }
    return record;
  }

  private read(slot: number, id: string): ValueKeyRecord | undefined {
    const bytes = Buffer.alloc(SLOT_BYTES);
    if (readSync(this.fd, bytes, 0, SLOT_BYTES, slot * SLOT_BYTES) < SLOT_BYTES) return undefined;
    if (!bytes.subarray(0, MAGIC.length).equals(MAGIC) || bytes.toString('hex', MAGIC.length, MAGIC.length + ID_BYTES) !== id) return undefined;
    const length = bytes[MAGIC.length + ID_BYTES];
    const at = bytes.readDoubleBE(AT);
    return { wrapped: Uint8Array.prototype.slice.call(bytes, HEADER, HEADER + length), ...(at > 0 ? { at } : {}) };
  }

  /** Every live key (state export). */
  all(): Array<{ id: string; value: ValueKeyRecord }> {
    return [...this.index.getRange()].flatMap(({ key, value }) => {
      const record = this.read(value, key);
      return record ? [{ id: key, value: record }] : [];
    });
  }

  /** Keeps a key in a free slot (inside a write transaction; the file is synced before it commits: `beforeCommit`). */
  put(id: string, record: ValueKeyRecord): void {
    if (!/^[0-9a-f]{32}$/.test(id)) throw new TypeError('a value key id is 16 bytes of hex');
    if (record.wrapped.byteLength > AT - HEADER) throw new TypeError(`a wrapped value key is at most ${AT - HEADER} bytes`);
    // Reserved before the write (`reserve`): in its slot and synced already.
    if (this.reserved.delete(id) && this.index.get(id) !== undefined) return;
    // Never in place: a transaction that wrote a held key's slot and then aborted would leave its values unopenable.
    if (this.index.get(id) !== undefined) throw new Error(`value key ${id} is held already`);
    const slot = this.take();
    this.held.delete(id);
    const bytes = Buffer.alloc(SLOT_BYTES);
    MAGIC.copy(bytes);
    bytes.write(id, MAGIC.length, 'hex');
    bytes[MAGIC.length + ID_BYTES] = record.wrapped.byteLength;
    bytes.set(record.wrapped, HEADER);
    bytes.writeDoubleBE(record.at ?? Date.now(), AT);
    writeSync(this.fd, bytes, 0, SLOT_BYTES, slot * SLOT_BYTES);
    this.written = true;
    this.index.put(id, slot);
  }

  /** Keys `reserve` put in their slots for a write about to use them (the write's `put` of one is then a no-op). */
  private readonly reserved = new Set<string>();

  /**
   * A key written to a slot of its own and synced before the write that uses it runs, so that
   * write's transaction holds no sync of its own: the syncs of writes under way at once are shared
   * (`syncShared`), as LMDB shares its own. The key is held from here on: if the write never uses it,
   * no record names it and the sweep erases it (value-key-erasure.ts strayValueKeys). Answers once
   * the slot is on disk.
   */
  async reserve(id: string, record: ValueKeyRecord): Promise<void> {
    await this.root.transaction(() => {
      this.put(id, record);
      this.written = false; // synced below, with the others under way
    });
    this.reserved.add(id);
    if (this.reserved.size > RESERVED_MAX) this.reserved.delete(this.reserved.values().next().value!);
    await this.syncShared();
  }

  private syncing: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  /** An fdatasync of the file that begins after this call: one for every caller waiting meanwhile. */
  private syncShared(): Promise<void> {
    if (this.queued) return this.queued;
    const run = () =>
      new Promise<void>((resolve, reject) => fdatasync(this.fd, (err) => (err ? reject(err) : resolve())));
    if (!this.syncing) {
      this.syncing = run().finally(() => (this.syncing = null));
      return this.syncing;
    }
    this.queued = this.syncing.catch(() => undefined).then(() => {
      this.queued = null;
      this.syncing = run().finally(() => (this.syncing = null));
      return this.syncing;
    });
    return this.queued;
  }

  /** A zeroed slot, or a new one at the end of the file. */
  private take(): number {
    for (const slot of this.free.getKeys({ limit: 1 })) {
      this.free.remove(slot);
      return slot;
    }
    const next = this.meta.get('next') ?? 0;
    this.meta.put('next', next + 1);
    return next;
  }

  /** Marks a key erased (inside a write transaction): it is unreadable from its commit, and zeroed by `zeroErased`. */
  remove(id: string): void {
    const slot = this.index.get(id);
    if (slot === undefined) return;
    this.held.delete(id);
    this.index.remove(id);
    this.erasing.put(slot, id);
  }

  /** At the end of a write transaction that wrote slots: they are on disk before the records sealed under them. */
  beforeCommit(): void {
    if (!this.written) return;
    this.written = false;
    fdatasyncSync(this.fd);
  }

  /** Whether an erasure waits for its zeros. */
  pending(): boolean {
    return this.erasing.getCount() > 0;
  }

  /**
   * Overwrites erased slots with zeros, syncs the file, then frees them, in one write transaction:
   * resolved once the zeros are on disk. Answers how many were zeroed.
   */
  async zeroErased(): Promise<number> {
    if (!this.pending()) return 0;
    return durably(this.root, this.root.transaction(() => this.zeroInTransaction()));
  }

  /** `zeroErased` at open, before anything is served: what a crash left between an erasure's commit and its zeros. */
  zeroErasedNow(): number {
    return this.pending() ? this.root.transactionSync(() => this.zeroInTransaction()) : 0;
  }

  private zeroInTransaction(): number {
    const slots = [...this.erasing.getKeys()];
    for (const slot of slots) writeSync(this.fd, ZEROS, 0, SLOT_BYTES, slot * SLOT_BYTES);
    if (slots.length > 0) fdatasyncSync(this.fd);
    for (const slot of slots) {
      this.erasing.remove(slot);
      this.free.put(slot, 1);
    }
    return slots.length;
  }

  close(): void {
    closeSync(this.fd);
  }
}

import type { AuditEntry } from '../../bus/subjects.js';

/**
 * Audit entries' stored bytes, made here rather than by lmdb-js's msgpackr, byte for byte what
 * msgpackr writes (test/unit/vault/audit-record.test.ts compares them): every read writes an entry,
 * and msgpackr's general path (a walk of its record transitions per key, a check per value) was
 * about a tenth of a read's CPU. The audit database has no shared structures, so msgpackr writes
 * each entry as a record that defines itself: `0xd4 0x72 0x40` (a record definition, id 0x40), the
 * array of its keys, then its values in that order. That prefix is the same for every entry of the
 * usual shape and is made once.
 *
 * Only the usual entry is made here: these eight keys in this order (handler.ts and operator.ts
 * make them so), each value a string of ASCII characters or null. Anything else (another shape, a
 * name with other characters, which msgpackr writes its own way) answers undefined, and the entry
 * is encoded by lmdb-js as before.
 *
 * The entries of a busy app's reads differ in their time alone, and not even in that within one
 * millisecond: the last entry's bytes are kept, answered again for an entry the same in every
 * field (they are never written to: LMDB copies them), and reused past its time when only the
 * time differs.
 */
const FIELDS = ['at', 'user', 'app', 'op', 'workspace', 'env', 'name', 'outcome'] as const;

const PREFIX = Buffer.from([0xd4, 0x72, 0x40, 0x90 | FIELDS.length, ...FIELDS.flatMap((k) => [0xa0 | k.length, ...Buffer.from(k, 'latin1')])]);

/** Bytes of a msgpack string header for `n` bytes (msgpackr picks the smallest, as msgpack says). */
const headerBytes = (n: number) => (n < 0x20 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5);

/** Whether `entry` has the usual keys in the usual order, each a string or null. */
function usualShape(entry: AuditEntry): boolean {
  let i = 0;
  for (const key in entry) {
    if (key !== FIELDS[i++]) return false;
    const v = (entry as unknown as Record<string, unknown>)[key];
    if (v !== null && typeof v !== 'string') return false;
  }
  return i === FIELDS.length;
}

/** `v` as msgpack at `at` of `out`; -1 when a character is not ASCII (`out` has room for ASCII). */
function writeString(out: Buffer, at: number, v: string | null): number {
  if (v === null) {
    out[at] = 0xc0;
    return at + 1;
  }
  const n = v.length;
  if (n < 0x20) out[at++] = 0xa0 | n;
  else if (n < 0x100) {
    out[at++] = 0xd9;
    out[at++] = n;
  } else if (n < 0x10000) {
    out[at++] = 0xda;
    out[at++] = n >> 8;
    out[at++] = n & 0xff;
  } else {
    out[at++] = 0xdb;
    out.writeUInt32BE(n, at);
    at += 4;
  }
  for (let c = 0; c < n; c++) {
    const code = v.charCodeAt(c);
    // Not ASCII: one character is more than one byte, written msgpackr's own way.
    if (code > 0x7f) return -1;
    out[at++] = code;
  }
  return at;
}

const sizeOf = (v: string | null) => (v === null ? 1 : headerBytes(v.length) + v.length);

export class AuditRecords {
  /** The last entry made here, field by field, and its bytes; `tail`: where its fields after `at` begin. */
  private last: AuditEntry | null = null;
  private bytes: Buffer = PREFIX;
  private tail = 0;

  /** The stored bytes of `entry`, or undefined when it is not of the usual shape (see above). */
  of(entry: AuditEntry): Buffer | undefined {
    if (!usualShape(entry)) return undefined;
    const last = this.last;
    if (last !== null && last.user === entry.user && last.app === entry.app && last.op === entry.op && last.workspace === entry.workspace && last.env === entry.env && last.name === entry.name && last.outcome === entry.outcome) {
      if (last.at === entry.at) return this.bytes;
      const kept = this.bytes.subarray(this.tail);
      const out = Buffer.allocUnsafe(PREFIX.length + sizeOf(entry.at) + kept.length);
      PREFIX.copy(out, 0);
      const tail = writeString(out, PREFIX.length, entry.at);
      if (tail < 0) return undefined;
      kept.copy(out, tail);
      return this.keep(entry, out, tail);
    }
    let size = PREFIX.length;
    for (let f = 0; f < FIELDS.length; f++) size += sizeOf(entry[FIELDS[f]]);
    const out = Buffer.allocUnsafe(size);
    PREFIX.copy(out, 0);
    let at = PREFIX.length;
    let tail = 0;
    for (let f = 0; f < FIELDS.length; f++) {
      at = writeString(out, at, entry[FIELDS[f]]);
      if (at < 0) return undefined;
      if (f === 0) tail = at;
    }
    return this.keep(entry, out, tail);
  }

  private keep(entry: AuditEntry, bytes: Buffer, tail: number): Buffer {
    // The values, not the entry itself: whoever holds the entry may change it later.
    const { at, user, app, op, workspace, env, name, outcome } = entry;
    this.last = { at, user, app, op, workspace, env, name, outcome };
    this.bytes = bytes;
    this.tail = tail;
    return bytes;
  }
}

import type { Database, Key, RootDatabase } from 'lmdb';
import { decode, encode } from '../../bus/codec.js';
import { ErrorReasons, PierError } from '../../bus/errors.js';

/**
 * Formats of what Pier keeps (docs/operations.md "Upgrading"), apart from the package version and
 * from the bus's wire format. Each stored record may say which format wrote it (`format`) and the
 * oldest format whose reader can still read it (`oldestReader`); absent, both are 1, so every
 * record written before the slot existed is format 1 and nothing is stamped until a format changes.
 *
 * A release reads every record whose `oldestReader` is at most the format it knows, ignoring the
 * fields it does not know (a format that only adds fields keeps `oldestReader` where it was, so the
 * previous release reads it and a rollback works). A record it cannot read is refused loudly by
 * name, never skipped and never half-read: the process that meets it is older than the one that
 * wrote it, and the answer says so.
 */
export const RECORD_FORMATS = {
  /** The registry's users, tokens, apps and providers (LMDB) and its log's entries (JetStream). */
  registry: 1,
  /** Upload records (LMDB and the upload log). */
  upload: 1,
  /**
   * A vault secret: its sealed value and its history of versions. 2: sizes, 3: generations (both
   * readable by 1), 4: a value sealed under a value key of its own (read from 0.3.0 on).
   */
  vaultSecret: 4,
  /** An earlier value of a vault secret, or a deleted secret's last (actors/vault/store.ts VersionRecord). 2: under a value key. */
  vaultVersion: 2,
  /** A value's own key, wrapped by its scope's data key (JetStream; on LMDB a slot file, actors/vault/value-key-slots.ts). */
  vaultValueKey: 1,
  /** A soft-deleted vault secret, without its value (DeletedRecord). */
  vaultDeleted: 1,
  /** A scope's data key, wrapped by the master key. */
  vaultDataKey: 1,
  /** Vault audit entries. */
  audit: 1,
  /** A replicated log's snapshot (its record and its dump). */
  snapshot: 1,
  /**
   * An entry of a vault bucket on JetStream (actors/vault/bucket-view.ts Intent): the revision its
   * writer read and the value or a tombstone. 1: `{e, v?, d?}`, as written since buckets were; the
   * value inside keeps its own kind's slot.
   */
  bucketEntry: 1,
  /** A failure the token actor shares with its other replicas (bus/subjects-token.ts SharedFailure). 1: `{limiter, key, at, origin}`. */
  sharedFailure: 1,
  /** What an app sent to its user's connections, kept for recovery (actors/history/). */
  gatewayHistory: 1,
} as const satisfies Record<string, number>;

export type RecordKind = keyof typeof RECORD_FORMATS;

/** The format slot of a stored record. */
export interface FormatSlot {
  format?: number;
  oldestReader?: number;
}

/** Why a record was not read: it was written by a later release in a format this one cannot read. */
export class RecordFormatError extends PierError {
  constructor(
    readonly kind: RecordKind,
    readonly found: number,
    where: string,
  ) {
    super(
      'UNAVAILABLE',
      `${where}: a stored ${kind} record needs a reader of format ${found} or later, this release reads format ${RECORD_FORMATS[kind]}: a later release wrote it; upgrade this process (docs/operations.md "Upgrading")`,
      { reason: ErrorReasons.RECORD_FORMAT },
    );
  }
}

/** The format a record needs of its reader (1 when it says nothing, or is not an object at all). */
export function neededReader(record: unknown): number {
  if (typeof record !== 'object' || record === null) return 1;
  const slot = record as FormatSlot;
  const needed = slot.oldestReader ?? slot.format ?? 1;
  return typeof needed === 'number' && Number.isInteger(needed) && needed >= 1 ? needed : Number.POSITIVE_INFINITY;
}

/** The record itself when this release reads it; a RecordFormatError naming `where` otherwise. */
export function readable<T>(kind: RecordKind, record: T, where: string): T {
  const needed = neededReader(record);
  if (needed > RECORD_FORMATS[kind]) throw new RecordFormatError(kind, needed, where);
  return record;
}

/**
 * Checks the format of every record `db` reads, whatever its API (get, getRange, a write's own
 * read): they all decode through the database's one decoder. The decoder itself stays lmdb-js's
 * own (its msgpackr, with its options): only its `decode` is wrapped, on this database alone.
 */
export function checkRecordsOf(db: Database, kind: RecordKind, where: string): void {
  const decoder = (db as unknown as { decoder?: { decode(bytes: Uint8Array, options?: unknown): unknown } }).decoder;
  if (!decoder) throw new TypeError(`${where}: this database has no decoder to check (not a msgpack database)`);
  const decode = decoder.decode.bind(decoder);
  decoder.decode = (bytes, options) => readable(kind, decode(bytes, options), where);
}

/** A database of `root` whose every read is format-checked as `kind` (the name says where, in a refusal). */
export function openRecords<V, K extends Key = string>(root: RootDatabase, name: string, kind: RecordKind): Database<V, K> {
  const db = root.openDB<V, K>({ name });
  checkRecordsOf(db as unknown as Database, kind, `the ${name} database`);
  return db;
}

/*
 * Records kept on JetStream streams are bytes Pier encodes itself: the bus's msgpack (bus/codec.ts),
 * written and read here alone, so every read checks the format. Writing goes through the same
 * encoder the bus uses, byte for byte as before these functions existed (release 0.3.0 reads them).
 */

/** The bytes of a record of `kind` as it is stored (every kind in the one encoding: the kind names what is written). */
export function recordBytes(_kind: RecordKind, record: unknown): Uint8Array {
  return encode(record);
}

/** A stored record from its bytes, format-checked (RecordFormatError naming `where`); bytes that are not msgpack throw as the decoder does. */
export function readRecord<T>(kind: RecordKind, bytes: Uint8Array, where: string): T {
  return readable(kind, decode<T>(bytes), where);
}

/**
 * A record from a stream others may write to: undefined when the bytes are not a record at all
 * (not msgpack: not Pier's, never accepted); a record of a later format is still refused by name.
 */
export function readRecordIfOurs<T>(kind: RecordKind, bytes: Uint8Array, where: string): T | undefined {
  let value: T;
  try {
    value = decode<T>(bytes);
  } catch {
    return undefined;
  }
  return readable(kind, value, where);
}

/**
 * The records of a message holding a batch of them (or one alone, as written before batches):
 * each one checked; what is not an object in it is not a record (left out), and bytes that are not
 * msgpack hold none.
 */
export function readBatch<T extends object>(kind: RecordKind, bytes: Uint8Array, where: string): T[] {
  let value: unknown;
  try {
    value = decode(bytes);
  } catch {
    return [];
  }
  return (Array.isArray(value) ? value : [value]).filter((e): e is T => typeof e === 'object' && e !== null).map((e) => readable(kind, e, where));
}

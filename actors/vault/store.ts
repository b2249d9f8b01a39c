import type { AuditEntry, AuditPage, AuditQuery } from '../../bus/subjects.js';
import type { FormatSlot } from '../../lib/state/record-format.js';
import { keyIdOf, plaintextSize } from '../../lib/crypto/secret-box.js';

// What the vault keeps (its records and where each is keyed), and the rules every store of it keeps
// (VaultStore, VaultWriter): LMDB (store-lmdb.ts) and JetStream (store-jetstream.ts) pass one contract suite.

/** A data key, wrapped (sealed) by the master key. One per (user, workspace, env). */
export interface DataKeyRecord {
  wrapped: Uint8Array;
  createdAt: string;
}

export interface SecretVersion {
  version: number;
  at: string;
  by: string;
  /** The value's size in bytes (format 2; absent from a version written before it). */
  size?: number;
}

/**
 * An earlier value of a secret, or the last one of a deleted secret (docs/vault.md "Versions"):
 * sealed as the value was (the same data key, the same associated data), under a key of its own
 * (`versionKey`), where the previous release never looks.
 */
export interface VersionRecord extends FormatSlot {
  sealed: Uint8Array;
  version: number;
  /** When this version was written, and by which app (or the operator). */
  at: string;
  by: string;
  /**
   * The app (or the operator) whose write made this value an earlier version: its update, restore
   * or delete. The bounds count the version against it, and only its writes trim it (payerOf).
   */
  keptBy?: string;
}

/**
 * A soft-deleted secret (docs/vault.md "Versions"): the record it was without its value (kept as
 * its last version), who deleted it and when. Kept apart from the live secrets: the previous
 * release does not read this database, so a rollback never brings a deleted secret back.
 */
export interface DeletedRecord extends FormatSlot, Omit<SecretRecord, 'sealed' | 'size' | 'gen' | 'format' | 'oldestReader'> {
  gen: string;
  deletedAt: string;
  deletedBy: string;
}

/**
 * The format this release writes secrets in (lib/state/record-format.ts): 2 adds `size`, 3 adds
 * `gen`; 0.2.0 reads past both (it ignores fields it does not know), so `oldestReader` stays 1.
 */
export const SECRET_FORMAT = { format: 3, oldestReader: 1 } as const;

/**
 * A secret whose value is sealed under a value key of its own (format 4, docs/vault.md
 * "Destroyed"): a release before 0.3.0 cannot open it, and refuses it by name rather than failing
 * to decrypt.
 */
export const KEYED_SECRET_FORMAT = { format: 4, oldestReader: 4 } as const;
/** The same for a kept version (format 2; 1 is sealed with the scope's data key). */
export const KEYED_VERSION_FORMAT = { format: 2, oldestReader: 2 } as const;

/** The format slot of a secret record holding `sealed`. */
export const secretFormatOf = (sealed: Uint8Array) => (keyIdOf(sealed) === undefined ? SECRET_FORMAT : KEYED_SECRET_FORMAT);
/** The format slot of a version record holding `sealed`. */
export const versionFormatOf = (sealed: Uint8Array) => (keyIdOf(sealed) === undefined ? { format: 1 } : KEYED_VERSION_FORMAT);

/**
 * A value key (docs/vault.md "Destroyed"): the key one value (and the versions that are that value)
 * is sealed under, wrapped by its scope's data key. Erasing it erases every copy of the value,
 * whatever still holds the sealed bytes (a freed page, a raft log, an earlier record).
 */
export interface ValueKeyRecord extends FormatSlot {
  wrapped: Uint8Array;
  /** When it was written (ms; JetStream: the sweep of keys no record names waits a margin past it). */
  at?: number;
}

/** A secret: its value sealed with its data key, and who wrote which version when (never a value). */
export interface SecretRecord extends FormatSlot {
  /**
   * The current value's size in bytes, and the version it is the size of: a release before format 2
   * keeps the field when it updates a record (it copies what it does not know), so a size is
   * believed only for the version it names.
   */
  size?: { version: number; bytes: number };
  /**
   * Which creation of the name this is (format 3): versions are kept per generation, so a secret
   * created again after a delete never shows the deleted one's versions. A record written before
   * it is the generation of its `createdAt` (genOf).
   */
  gen?: string;
  sealed: Uint8Array;
  version: number;
  createdAt: string;
  createdBy: string;
  updatedAt: string;
  updatedBy: string;
  /** Metadata of earlier versions, newest last. */
  history: SecretVersion[];
}

const SEP = '\u0000';

/** `user \0 workspace \0 env`: where a data key lives and the prefix of its secrets. */
export const scopeKey = (user: string, workspace: string, env: string) => `${user}${SEP}${workspace}${SEP}${env}`;
export const secretKey = (scope: string, name: string) => `${scope}${SEP}${name}`;
export const nameOf = (key: string) => key.slice(key.lastIndexOf(SEP) + 1);

/** The current value's size in bytes, when the record knows it for its current version. */
export const sizeOf = (record: SecretRecord): number | undefined => (record.size?.version === record.version ? record.size.bytes : undefined);

/** A value's size in bytes from its sealed form (lib/crypto/secret-box.ts: the box's header and tag aside). */
export const sealedSize = (sealed: Uint8Array): number => plaintextSize(sealed);

/** The generation of a live or deleted secret (SecretRecord.gen). */
export const genOf = (record: { gen?: string; createdAt: string }): string => record.gen ?? `c${record.createdAt}`;

/** Where version `version` of generation `gen` of the secret at `key` is kept; sorted by version within a generation. */
export const versionKey = (key: string, gen: string, version: number) => `${key}${SEP}${gen}${SEP}${String(version).padStart(10, '0')}`;
/** The prefix of every version of one generation of a secret. */
export const versionPrefix = (key: string, gen: string) => `${key}${SEP}${gen}${SEP}`;
/** The secret key (scope and name) a version key belongs to. */
export const secretOfVersion = (vkey: string) => vkey.slice(0, vkey.lastIndexOf(SEP, vkey.lastIndexOf(SEP) - 1));
/** The user of a scope or any key under it. */
export const userOf = (key: string) => key.slice(0, key.indexOf(SEP));

/** The scope (user, workspace, env) of a secret or version key. */
export const scopeOf = (key: string) => key.split(SEP, 3).join(SEP);

/** Bytes a version takes against the bounds: its sealed value, as stored. */
export const versionBytes = (v: VersionRecord): number => v.sealed.byteLength;

/** Whose history a version is (VersionRecord.keptBy): a version kept before the field, or imported without it, is its writer's. */
export const payerOf = (v: VersionRecord): string => (typeof v.keptBy === 'string' ? v.keptBy : String(v.by));

/**
 * The accounts the byte bounds count (docs/vault.md "Versions"): one app's versions in one scope,
 * and one app's versions for one user. No account is shared by two apps, so no app's writes fill
 * another's. (Four parts and two: neither can be mistaken for the other, no part holds a NUL.)
 */
export const scopeAccount = (scope: string, payer: string) => `${scope}${SEP}${payer}`;
export const appAccount = (user: string, payer: string) => `${user}${SEP}${payer}`;
/** Both accounts version `v` (at `vkey`) counts against. */
export const accountsOf = (vkey: string, v: VersionRecord): [string, string] => [scopeAccount(scopeOf(vkey), payerOf(v)), appAccount(userOf(vkey), payerOf(v))];

/**
 * What the vault keeps, whatever keeps it (docs/operations.md "How writes stay correct" will add a replicated one): data
 * keys, sealed secrets, audit entries. Writes go through `write`: everything done inside commits
 * together or not at all, and "create if absent" and check-and-set hold across replicas.
 */
export interface VaultStore {
  /**
   * Catches up with writes made anywhere so far (another replica's just-answered create included);
   * undefined when there is never anything to catch up with (LMDB: one environment).
   */
  sync(): Promise<void> | undefined;
  /** The answers of `dataKey` and `secret` may be shared between reads (LMDB's are frozen): never change them. */
  dataKey(scope: string): DataKeyRecord | undefined;
  secret(key: string): SecretRecord | undefined;
  /** Secrets of one scope, sorted by name. */
  listScope(scope: string): Array<{ key: string; value: SecretRecord }>;
  /** All scopes of a (user, workspace), whatever the env. */
  scopesOf(user: string, workspace: string): string[];
  /** Newest first, at most `limit`, optionally one user's. */
  /** The newest entries matching `q`, newest first, searched back through at most `scanMax` entries. */
  readAudit(q: AuditQuery, scanMax?: number): Promise<AuditPage>;
  /** A kept version (versionKey), or a deleted secret (secretKey). */
  version(vkey: string): VersionRecord | undefined;
  deleted(key: string): DeletedRecord | undefined;
  /** Deleted secrets of one scope, sorted by name; of every scope when `scope` is undefined (the expiry sweep). */
  listDeleted(scope?: string): Array<{ key: string; value: DeletedRecord }>;
  /** A value key (wrapped), by its id (lib/crypto/secret-box.ts keyIdOf); undefined once erased. */
  valueKey(id: string): ValueKeyRecord | undefined;
  /**
   * Keeps a value key, on disk, before the write that will seal a value under it (LMDB: its slot,
   * synced together with those of other writes under way; value-key-slots.ts `reserve`). Absent on
   * JetStream, which reserves ahead instead (`reserveValueKeys`).
   */
  reserveValueKey?(id: string, record: ValueKeyRecord): Promise<void>;
  /**
   * Keeps value keys, durably and together, ahead of the writes that will seal under them
   * (value-key-pool.ts); a write that then puts one of them commits nothing for it. JetStream,
   * where a write would otherwise commit its key before its secret, one quorum round trip after the other.
   */
  reserveValueKeys?(keys: ReadonlyArray<{ id: string; record: ValueKeyRecord }>): Promise<void>;
  /** Every data key, secret, kept version, deleted secret and value key, for `pier state export` (sealed as they are). */
  everything(): {
    dataKeys: Array<{ scope: string; record: DataKeyRecord }>;
    secrets: Array<{ key: string; value: SecretRecord }>;
    versions: Array<{ key: string; value: VersionRecord }>;
    deleted: Array<{ key: string; value: DeletedRecord }>;
    valueKeys: Array<{ id: string; value: ValueKeyRecord }>;
  };
  write<T>(fn: (w: VaultWriter) => T): Promise<T>;
  /**
   * Appends audit entries in one write (reads and refusals are batched); `prepared`: what
   * `prepareAudit` made of each, in the same order, when the store has it.
   */
  appendAudit(entries: AuditEntry[], prepared?: readonly unknown[]): Promise<void>;
  /** What `appendAudit` will want of an entry, made as the entry is made (LMDB: its stored bytes). */
  prepareAudit?(entry: AuditEntry): unknown;
  /**
   * Erases the earlier records of these secrets (every secret's, without `keys`) from where the
   * store keeps them beyond the current one, written before `writtenBefore` (ms): on JetStream the
   * secrets bucket's history (docs/vault.md "Versions"). Absent where nothing can be done (LMDB).
   * Answers how many records were erased.
   */
  scrub?(writtenBefore: number, keys?: readonly string[]): Promise<number>;
  /**
   * Erases from where the store keeps them (JetStream: the buckets' streams) the earlier records of
   * removed keys: under `under` (a purged workspace, `user \0 workspace \0`), every bucket's, at once;
   * without it, the data keys', versions' and deleted secrets' left by a purge or destroy cut short
   * before its erasures (the sweep; secrets' own are `scrub`'s). Absent where records cannot be
   * erased one by one (LMDB: freed pages, docs/vault.md "Versions"). Answers how many were erased.
   */
  eraseRemoved?(under?: string): Promise<number>;
  /**
   * `sync`, asking the streams where they end rather than trusting the writers' announcements:
   * afterwards the store shows every record written before the call, so every record written before
   * one it showed (JetStream, whose buckets are followed apart; LMDB commits a write whole).
   */
  syncWithStreams?(): Promise<void>;
  /** Retention: entries older than `before` (ms), then the oldest past `maxEntries`; answers how many went. */
  pruneAudit(before: number, maxEntries: number): Promise<number>;
  close(): Promise<void>;
}

/** What a write may do; its reads see the write's own changes. */
export interface VaultWriter {
  dataKey(scope: string): DataKeyRecord | undefined;
  dataKeys(): Iterable<{ scope: string; record: DataKeyRecord }>;
  putDataKey(scope: string, record: DataKeyRecord): void;
  removeDataKey(scope: string): void;
  secret(key: string): SecretRecord | undefined;
  putSecret(key: string, record: SecretRecord): void;
  removeSecret(key: string): void;
  listScope(scope: string): Array<{ key: string; value: SecretRecord }>;
  scopesOf(user: string, workspace: string): string[];
  appendAudit(entry: AuditEntry): void;
  version(vkey: string): VersionRecord | undefined;
  putVersion(vkey: string, record: VersionRecord): void;
  /** Removes a kept version; on JetStream its bytes are erased from the stream too. */
  removeVersion(vkey: string): void;
  /** Kept versions whose key starts with `prefix` (a generation, a scope, a user), sorted by key. */
  versionsUnder(prefix: string): Array<{ key: string; value: VersionRecord }>;
  /** Their keys alone (nothing decoded): what the count per secret needs on every update. */
  versionKeysUnder(prefix: string): string[];
  /** Bytes of the kept versions counted against an account (`scopeAccount`, `appAccount`): what the bounds count. */
  accountBytes(account: string): number;
  deleted(key: string): DeletedRecord | undefined;
  putDeleted(key: string, record: DeletedRecord): void;
  removeDeleted(key: string): void;
  listDeleted(scope: string): Array<{ key: string; value: DeletedRecord }>;
  valueKey(id: string): ValueKeyRecord | undefined;
  /** Keeps a value key (before the first record sealed under it, in the same write). */
  putValueKey(id: string, record: ValueKeyRecord): void;
  /**
   * Erases a value key: on LMDB its slot is overwritten with zeros and synced before the write is
   * answered; on JetStream its message is erased from the stream. Called by the write itself once
   * no record of the secret holds a value sealed under it (value-key-erasure.ts).
   */
  removeValueKey(id: string): void;
}

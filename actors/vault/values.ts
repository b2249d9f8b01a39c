import { randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import { KEY_ID_BYTES, keyIdOf, open, seal, sealKeyed } from '../../lib/crypto/secret-box.js';
import type { DataKeys } from './data-keys.js';
import { ValueKeyPool } from './value-key-pool.js';
import type { ValueKeyRecord, VaultStore, VaultWriter } from './store.js';

/** Associated data of a sealed value: the record's full path, so a ciphertext moved elsewhere fails. */
export const valueContext = (key: string) => `pier/vault/secret/${key}`;
/** Associated data of a wrapped value key: its scope and id, so a key moved to another scope or id fails. */
const valueKeyContext = (scope: string, id: string) => `pier/vault/value-key/${scope}/${id}`;

/** A value key made, and kept on disk, before the write that seals under it (Values.prepare). */
export interface PreparedKey {
  /**
   * Sealed under by an attempt of its write already (Values.seal). On JetStream an attempt that
   * lost leaves its key as a stray, erased at the write's end unless a record holds it; a retry
   * that sealed under the same key could have its value moved meanwhile where that check does not
   * look (a delete), and lose its key. So a key serves one attempt; a retry makes its own.
   */
  used?: boolean;
  scope: string;
  /** The data key it is wrapped by. */
  dataKey: Buffer;
  idBytes: Buffer;
  id: string;
  valueKey: Buffer;
  record: ValueKeyRecord;
}

/**
 * The key a value needs is not in this replica's store or view: erased (the value is destroyed), or,
 * on JetStream, not followed yet (each bucket's view follows its own stream, so a record can show
 * before the key its writer committed first). A read catches up with the streams once before it
 * believes the first (ops.ts).
 */
export class KeyNotShown extends Error {}

/** The wire format whose vault replicas seal new values under value keys (bus/envelope.ts). */
export const VALUE_KEYS_WIRE = 3;

/** Unwrapped value keys kept in memory (32 bytes each, and their wrapped form). */
const CACHED_KEYS = 4_096;

/**
 * How values are sealed and opened (docs/vault.md "Destroyed"). A value is sealed either with its
 * scope's data key (the format every release reads), or under a value key of its own, wrapped by
 * the data key and named in the box: erasing that key (value-key-erasure.ts) makes every copy of
 * the value unreadable, the master key in hand. This release reads both; it seals under value keys
 * only when `sealsUnderValueKeys` says every vault replica writes them too (index.ts sealingGate).
 *
 * Unwrapped value keys are cached by id, each beside the wrapped bytes it came from, as data keys
 * are: the stored key is read on every use, so a key erased anywhere is never used from memory.
 */
export class Values {
  private readonly plain = new Map<string, { wrapped: Buffer; key: Buffer }>();
  /** Keys kept ahead of the writes, on stores that reserve them in batches (value-key-pool.ts). */
  private readonly pool: ValueKeyPool<PreparedKey> | null;

  constructor(
    private readonly store: VaultStore,
    private readonly dataKeys: DataKeys,
    private readonly sealsUnderValueKeys: () => boolean,
    options: { now?: () => number; onKeysFailed?: (err: unknown) => void } = {},
  ) {
    const reserve = store.reserveValueKeys?.bind(store);
    this.pool = reserve
      ? new ValueKeyPool({
          newKey: (scope, dataKey) => this.newKey(scope, dataKey),
          reserve: (keys) => reserve(keys.map((k) => ({ id: k.id, record: k.record }))),
          now: options.now ?? Date.now,
          onFillFailed: options.onKeysFailed ?? (() => undefined),
        })
      : null;
  }

  /**
   * The key that opens `sealed` (a value of `scope`): its value key, or the scope's data key. Throws
   * KeyNotShown when it is not there. `id`: `keyIdOf(sealed)`, when the caller has it already.
   */
  keyFor(scope: string, sealed: Uint8Array, w?: VaultWriter, id = keyIdOf(sealed)): Buffer {
    const dataKey = w ? this.dataKeys.inWrite(scope, w) : this.dataKeys.get(scope);
    if (!dataKey) throw new KeyNotShown('no data key for the scope');
    if (id === undefined) return dataKey;
    const record = (w ?? this.store).valueKey(id);
    if (!record) throw new KeyNotShown('its value key was erased, or is not in this replica\'s view yet');
    const cached = this.plain.get(id);
    if (cached && cached.wrapped.equals(record.wrapped)) {
      // The most recently used last (already so when it was the last used).
      if (id !== this.lastUsed) {
        this.plain.delete(id);
        this.plain.set(id, cached);
        this.lastUsed = id;
      }
      return cached.key;
    }
    const key = open(dataKey, record.wrapped, valueKeyContext(scope, id));
    this.remember(id, record.wrapped, key);
    return key;
  }

  /** The id last put last in `plain`. */
  private lastUsed: string | undefined = undefined;

  private remember(id: string, wrapped: Uint8Array, key: Buffer): void {
    // A new id goes last; one already there keeps its place (Map.set).
    if (!this.plain.has(id)) this.lastUsed = id;
    this.plain.set(id, { wrapped: Buffer.from(wrapped), key });
    for (const oldest of this.plain.keys()) {
      if (this.plain.size <= CACHED_KEYS) break;
      this.plain.delete(oldest);
    }
  }

  /** Whether a value sealed now goes under a value key of its own. */
  sealing(): boolean {
    return this.sealsUnderValueKeys();
  }

  /** `sealed`, a value of the secret at `key` in `scope`, opened. */
  open(scope: string, key: string, sealed: Uint8Array, w?: VaultWriter): Buffer {
    try {
      return open(this.keyFor(scope, sealed, w), sealed, valueContext(key));
    } catch (err) {
      throw new PierError('INTERNAL', 'secret could not be decrypted', { cause: err });
    }
  }

  /**
   * A value key for a write about to seal a value of `scope`, kept on disk before the write runs:
   * on JetStream one of the keys reserved ahead for the scope's writes (value-key-pool.ts), so the
   * write need not commit its key before its secret; on LMDB one reserved now
   * (VaultStore.reserveValueKey: the syncs of writes under way at once are shared, instead of one
   * inside each write's transaction). Undefined when none is ready (JetStream: the write puts its
   * own), the scope has no data key yet, or values are sealed with their data keys. A key a write
   * does not use is one no record names: the sweep erases it.
   */
  async prepare(scope: string): Promise<PreparedKey | undefined> {
    if (!this.sealsUnderValueKeys()) return undefined;
    const dataKey = this.dataKeys.get(scope);
    if (!dataKey) return undefined;
    if (this.pool) return this.pool.take(scope, dataKey);
    if (!this.store.reserveValueKey) return undefined;
    const prepared = this.newKey(scope, dataKey);
    await this.store.reserveValueKey(prepared.id, prepared.record);
    return prepared;
  }

  private newKey(scope: string, dataKey: Buffer): PreparedKey {
    const idBytes = randomBytes(KEY_ID_BYTES);
    const id = idBytes.toString('hex');
    const valueKey = randomBytes(32);
    const wrapped = seal(dataKey, valueKey, valueKeyContext(scope, id));
    return { scope, dataKey, idBytes, id, valueKey, record: { format: 1, wrapped, at: Date.now() } };
  }

  /**
   * A new value of the secret at `key` sealed, inside the write `w` that keeps it (with its value
   * key, when it has one: `prepared`'s when the scope's data key is still the one it is wrapped by,
   * else a new one).
   */
  seal(scope: string, key: string, plaintext: Buffer, w: VaultWriter, underValueKey = this.sealsUnderValueKeys(), prepared?: PreparedKey): Uint8Array {
    const dataKey = this.dataKeys.getOrCreate(scope, w);
    if (!underValueKey) return seal(dataKey, plaintext, valueContext(key));
    const k = prepared && !prepared.used && prepared.scope === scope && prepared.dataKey.equals(dataKey) ? prepared : this.newKey(scope, dataKey);
    if (k === prepared) prepared.used = true;
    // Kept before the record sealed under it (JetStream commits a write's changes in order, and
    // commits nothing for a key reserved ahead: buffered-writer.ts; on LMDB a prepared key is in its slot already).
    w.putValueKey(k.id, k.record);
    this.remember(k.id, k.record.wrapped, k.valueKey);
    return sealKeyed(k.valueKey, k.idBytes, plaintext, valueContext(key));
  }

  /**
   * A copy of an earlier value for a new version (a restore): sealed anew when it is under a value
   * key, so no two versions ever share one and destroying either erases only its own. A value
   * sealed with the data key is copied as it is (nothing to erase).
   */
  reseal(scope: string, key: string, sealed: Uint8Array, w: VaultWriter): Uint8Array {
    if (keyIdOf(sealed) === undefined) return sealed;
    return this.seal(scope, key, this.open(scope, key, sealed, w), w);
  }
}

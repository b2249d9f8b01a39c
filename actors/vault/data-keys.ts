import { randomBytes } from 'node:crypto';
import type { Keyring } from '../../lib/crypto/keyring.js';
import type { VaultStore, VaultWriter } from './store.js';

const context = (scope: string) => `pier/vault/data-key/${scope}`;

/**
 * Data keys per (user, workspace, env), wrapped by the master key. Unwrapped keys are kept in
 * memory only, each beside the wrapped bytes it came from: the stored record is read on every use
 * (a memory-mapped read), so a key another replica replaced or removed is never used from memory.
 * Rotation re-wraps the keys without touching a single secret.
 */
export class DataKeys {
  private readonly plain = new Map<string, { wrapped: Buffer; key: Buffer }>();

  constructor(
    private readonly store: VaultStore,
    private readonly keyring: Keyring,
    private readonly now: () => Date,
  ) {}

  /** The scope's key, or undefined when the scope has none yet. */
  get(scope: string): Buffer | undefined {
    return this.unwrap(scope, this.store.dataKey(scope));
  }

  private unwrap(scope: string, record: { wrapped: Uint8Array } | undefined): Buffer | undefined {
    if (!record) return undefined;
    const cached = this.plain.get(scope);
    if (cached && cached.wrapped.equals(record.wrapped)) return cached.key;
    const key = this.keyring.open(record.wrapped, context(scope));
    this.plain.set(scope, { wrapped: Buffer.from(record.wrapped), key });
    return key;
  }

  /** The scope's key as the write `w` sees it, or undefined (never created here). */
  inWrite(scope: string, w: VaultWriter): Buffer | undefined {
    return this.unwrap(scope, w.dataKey(scope));
  }

  /** The scope's key, created if missing, inside the write `w`. */
  getOrCreate(scope: string, w: VaultWriter): Buffer {
    const existing = this.unwrap(scope, w.dataKey(scope));
    if (existing) return existing;
    const key = randomBytes(32);
    const wrapped = this.keyring.seal(key, context(scope));
    w.putDataKey(scope, { wrapped, createdAt: this.now().toISOString() });
    this.plain.set(scope, { wrapped, key });
    return key;
  }

  /** Drops a scope's key (its secrets are gone), inside the write `w`. */
  remove(scope: string, w: VaultWriter): void {
    w.removeDataKey(scope);
    this.plain.delete(scope);
  }

  /** Re-wraps every data key not wrapped under the current master key. */
  rewrapAll(): Promise<number> {
    return this.store.write((w) => {
      let n = 0;
      for (const { scope, record } of w.dataKeys()) {
        if (!this.keyring.isStale(record.wrapped)) continue;
        const key = this.keyring.open(record.wrapped, context(scope));
        w.putDataKey(scope, { ...record, wrapped: this.keyring.seal(key, context(scope)) });
        n++;
      }
      return n;
    });
  }
}

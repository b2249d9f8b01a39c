import { randomBytes } from 'node:crypto';
import type { Keyring } from '../../lib/keyring.js';
import type { VaultStore } from './store.js';

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
    const record = this.store.dataKeys.get(scope);
    if (!record) return undefined;
    const cached = this.plain.get(scope);
    if (cached && cached.wrapped.equals(record.wrapped)) return cached.key;
    const key = this.keyring.open(record.wrapped, context(scope));
    this.plain.set(scope, { wrapped: Buffer.from(record.wrapped), key });
    return key;
  }

  /** The scope's key, created if missing. Call inside a write transaction. */
  getOrCreate(scope: string): Buffer {
    const existing = this.get(scope);
    if (existing) return existing;
    const key = randomBytes(32);
    const wrapped = this.keyring.seal(key, context(scope));
    this.store.dataKeys.put(scope, { wrapped, createdAt: this.now().toISOString() });
    this.plain.set(scope, { wrapped, key });
    return key;
  }

  /** Drops a scope's key (its secrets are gone). Call inside a write transaction. */
  remove(scope: string): void {
    this.store.dataKeys.remove(scope);
    this.plain.delete(scope);
  }

  /** Re-wraps every data key not wrapped under the current master key. */
  async rewrapAll(): Promise<number> {
    return this.store.root.transaction(() => {
      let n = 0;
      for (const { key: scope, value } of this.store.dataKeys.getRange()) {
        if (!this.keyring.isStale(value.wrapped)) continue;
        const key = this.keyring.open(value.wrapped, context(scope));
        this.store.dataKeys.put(scope, { ...value, wrapped: this.keyring.seal(key, context(scope)) });
        n++;
      }
      return n;
    });
  }
}

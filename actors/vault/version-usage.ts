import { accountsOf, versionBytes, type VersionRecord } from './store.js';

/**
 * Bytes of kept versions per account (store.ts accountsOf: one app's in a scope, one app's for a
 * user), as a view of the versions bucket shows them (JetStream: derived as the view applies each
 * entry, never written; LMDB keeps its own in the same transactions as the versions, store-lmdb-write.ts).
 * What the bounds of docs/vault.md "Versions" count.
 */
export class VersionUsage {
  private readonly byAccount = new Map<string, number>();

  bytes(account: string): number {
    return this.byAccount.get(account) ?? 0;
  }

  /** A version's key changed from `before` to `after` (either absent). */
  changed(vkey: string, before: VersionRecord | undefined, after: VersionRecord | undefined): void {
    if (before) this.add(vkey, before, -1);
    if (after) this.add(vkey, after, 1);
  }

  private add(vkey: string, v: VersionRecord, sign: 1 | -1): void {
    for (const k of accountsOf(vkey, v)) {
      const next = (this.byAccount.get(k) ?? 0) + sign * versionBytes(v);
      if (next > 0) this.byAccount.set(k, next);
      else this.byAccount.delete(k);
    }
  }
}

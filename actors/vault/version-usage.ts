import { scopeOf, userOf, versionBytes, type VersionRecord } from './store.js';

/**
 * Bytes of kept versions per scope and per user, as a view of the versions bucket shows them
 * (JetStream: derived as the view applies each entry, never written; LMDB keeps its own in the
 * same transactions as the versions, store.ts). What the bounds of docs/vault.md "Versions" count.
 */
export class VersionUsage {
  private readonly byKey = new Map<string, number>();

  bytes(scopeOrUser: string): number {
    return this.byKey.get(scopeOrUser) ?? 0;
  }

  /** A version's key changed from `before` to `after` (either absent). */
  changed(vkey: string, before: VersionRecord | undefined, after: VersionRecord | undefined): void {
    const delta = (after ? versionBytes(after) : 0) - (before ? versionBytes(before) : 0);
    if (delta === 0) return;
    for (const k of [scopeOf(vkey), userOf(vkey)]) {
      const next = (this.byKey.get(k) ?? 0) + delta;
      if (next > 0) this.byKey.set(k, next);
      else this.byKey.delete(k);
    }
  }
}

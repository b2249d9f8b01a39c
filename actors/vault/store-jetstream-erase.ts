import type { BucketView } from './bucket-view.js';
import type { VaultViews } from './buffered-writer.js';
import type { SecretRecord } from './store.js';
import { MARKED } from './store-jetstream-sync.js';

// What the JetStream store erases from its streams apart from a write (docs/vault.md "Destroyed"):
// a secret's earlier records once old enough, and what a purge or a destroy cut short left.

/** VaultStore.scrub: the secrets' earlier records written before `writtenBefore` (ms). */
export async function scrubSecrets(view: BucketView<SecretRecord>, writtenBefore: number, keys?: readonly string[]): Promise<number> {
  let erased = 0;
  for (const key of keys ?? view.keysEverWritten()) {
    const revision = view.revisionOf(key);
    if (revision > 0) erased += await view.eraseBefore(key, revision, writtenBefore);
  }
  return erased;
}

/**
 * VaultStore.eraseRemoved: the earlier entries of removed keys the views have not seen erased.
 * Under a purged workspace, a secret's too, at once; elsewhere those are `scrub`'s, with its margin.
 */
export async function eraseRemoved(views: VaultViews, under?: string): Promise<number> {
  const buckets = under === undefined ? (['keys', 'versions', 'deleted', 'valueKeys'] as const) : MARKED;
  let erased = 0;
  for (const k of buckets) {
    const view = views[k] as BucketView<unknown>;
    for (const [key, seq] of view.removedUnerased(under)) erased += await view.eraseBefore(key, seq);
  }
  return erased;
}

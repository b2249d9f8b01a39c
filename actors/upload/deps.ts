import type { UploadCompleted } from '../../bus/subjects.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import type { UploadLocks } from './lock.js';
import type { UploadRoot } from './root.js';
import type { UploadStore } from './store.js';

/**
 * What the upload actor's parts share (its handlers, write sessions, repair, finish and upkeep), in
 * a file of its own: each part imports this, never another part, for what it needs of the rest.
 */
export interface UploadDeps {
  store: UploadStore;
  cache: RegistryCache;
  /** Maps the app's view (`dest`, `storage_path`) to the user's folder on the host. */
  root: UploadRoot;
  busId: string;
  now: () => number;
  chunkMaxBytes: number;
  /** Unfinished uploads one user may have per app (POST 429 past it). */
  maxUnfinished: number;
  /** The write lock of each upload (lock.ts). */
  locks: UploadLocks;
  /** A completed upload: the bus event, and the app's upload.callback (`id`: the upload's, for the event id). */
  completed: (ev: UploadCompleted, id: string) => void;
}

import type { UploadDeps } from './deps.js';
import { isFolderMoved, publish, removePart } from './files.js';
import { lockLost, type Lease } from './lock.js';
import type { Upload, UploadStore } from './store.js';

/** Forgets an upload and drops its partial data. */
export async function removeUpload(store: UploadStore, u: Upload): Promise<void> {
  await store.write((w) => w.remove(u));
  await removePart(u.part);
}

/** Publishes a complete upload at its target and marks it done (inside the caller's error handling). */
export async function finish(deps: UploadDeps, u: Upload, lease?: Lease): Promise<string> {
  const top = deps.root.userFolder(u.user);
  // The whole file's offset is recorded before the part is renamed away: a crash between the two
  // leaves a record at the full size with its part gone, which recovery reads as published
  // (upkeep.ts), not as a part of 0 bytes (which would take back every acknowledged byte).
  // A write session's lease fences it (lock.ts): one that lost its lock publishes nothing.
  if (lease || deps.store.get(u.id)?.offset !== u.fileSize) {
    const recorded = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (!current || current.state !== 'active' || (lease && !lease.holds(current))) return false;
      w.put({ ...current, offset: u.fileSize });
      return true;
    });
    if (lease && !recorded) throw lockLost();
  }
  const landed = await publish(u.part, u.target, u.conflict, top).catch(async (err: unknown) => {
    // A writer that stalled past its lock while another replica took the upload over (and may
    // have published it, its part gone): that is what it is told, never "upload the file again".
    if (lease) {
      if (!lease.holds(await deps.store.read((r) => r.get(u.id)))) throw lockLost();
    }
    // A folder on the way was swapped for a link: the file cannot land where it was meant to. The upload goes.
    if (isFolderMoved(err)) await removeUpload(deps.store, u);
    throw err;
  });
  await deps.store.write((w) => w.put({ ...(w.get(u.id) ?? u), offset: u.fileSize, state: 'done', lock: null, updatedAt: deps.now() }));
  deps.completed({ user: u.user, app: u.app, path: deps.root.appPath(u.user, landed), size: u.fileSize }, u.id);
  return landed;
}

import { removePart } from './files.js';
import type { UploadDeps } from './deps.js';
import { repair } from './repair.js';
import { completes, type Upload } from './store.js';

/**
 * After a crash: each unfinished upload not being written by a live replica gets the offset of
 * what is really on disk. Bytes past the recorded (acknowledged, fsynced) offset are cut off: they
 * may be a torn write. A complete one is published.
 *
 * It runs at start and once more when other replicas' heartbeats had time to come, so uploads may
 * be in use meanwhile: an upload is repaired only under a lock of its own (lock.ts), taken only if
 * the record is still the one read (no PATCH took or changed it in between).
 */
export async function recover(deps: UploadDeps): Promise<void> {
  for (const u of deps.store.all()) {
    if (u.state !== 'active' || (u.lock && deps.locks.alive(u.lock))) continue;
    // One upload that cannot be recovered now (its part tampered with, its disk away) stays as it
    // is: its next PATCH says what is wrong, the idle sweep removes it; the others and the start go on.
    await repair(deps, u).catch(() => undefined);
  }
}

/**
 * When an upload's idle clock started: its last use, or the end of the lease of a writer that died
 * holding it (the client was told "busy" until then, and needs a whole idle period to come back).
 */
const idleSince = (u: Upload, now: number) => Math.max(u.updatedAt, u.lock ? Math.min(u.lock.until, now) : 0);

/**
 * Unfinished uploads idle past `idleMs` go, with their bytes; one being written never does. The
 * record is removed only if it is still the one read (a PATCH in between makes it not idle).
 *
 * One whole but unpublished (a `finish` cut between recording the full size and the rename: a
 * crash, or a pause that outlived its lease, after `recover`'s runs) is published here
 * instead: every byte of it was acknowledged.
 */
export async function sweep(deps: UploadDeps, idleMs: number): Promise<void> {
  const now = deps.now();
  for (const u of deps.store.all()) {
    if (u.lock && deps.locks.alive(u.lock)) continue;
    if (u.state === 'active' && completes(u, u.offset)) {
      await repair(deps, u).catch(() => undefined);
      // Published: done here. One that cannot land (conflict=fail and the target is there) is
      // still swept once idle, as before.
      if (deps.store.get(u.id)?.state !== 'active') continue;
    }
    if (now - idleSince(u, now) <= idleMs) continue;
    const removed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (!current || current.updatedAt !== u.updatedAt || (current.lock && deps.locks.alive(current.lock))) return false;
      w.remove(current);
      return true;
    });
    if (removed) await removePart(u.part);
  }
}

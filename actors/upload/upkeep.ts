import { createPart, cutBack, partExists, partSize, removePart } from './files.js';
import { finish, type UploadDeps } from './handler.js';
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
    await recoverOne(deps, u).catch(() => undefined);
  }
}

async function recoverOne(deps: UploadDeps, seen: Upload): Promise<void> {
  // On disk as recorded, and not complete: nothing to repair, nothing to lock.
  if ((await partSize(seen.part)) === seen.offset && !completes(seen, seen.offset)) return;
  if (completes(seen, seen.offset) && !(await partExists(seen.part))) return markPublished(deps, seen);
  const unchanged = (current: Upload | undefined): current is Upload =>
    current !== undefined && current.state === 'active' && current.offset === seen.offset && !(current.lock && deps.locks.alive(current.lock));
  const lease = await deps.locks.take(seen.id, unchanged, { touch: false });
  if (!lease) return; // a PATCH got there first: not a crash's leftover
  try {
    const u = lease.upload;
    const size = await partSize(u.part);
    let offset = u.offset;
    if (size > offset) await cutBack(u.part, offset, deps.root.userFolder(u.user));
    if (size < offset) offset = size;
    if (size === 0 && offset === 0) await createPart(u.part, deps.root.userFolder(u.user)).catch(() => undefined);
    const fixed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (current?.lock?.session !== lease.session) return null;
      const next: Upload = { ...current, offset, lock: null };
      w.put(next);
      return next;
    });
    if (fixed && completes(fixed, offset)) await finish(deps, fixed).catch(() => undefined);
  } finally {
    lease.end();
  }
}

/**
 * A record at the full size whose part is gone: the crash came after the part was renamed to its
 * target and before the record said done (handler.ts `finish` records the size first). It is done;
 * the completed event goes out now, naming the target (for conflict=rename the numbered name the
 * file may have landed at is not known, so no event is sent for it).
 */
async function markPublished(deps: UploadDeps, seen: Upload): Promise<void> {
  const unchanged = (current: Upload | undefined): current is Upload => current !== undefined && current.state === 'active' && completes(current, current.offset);
  const lease = await deps.locks.take(seen.id, unchanged, { touch: false });
  if (!lease) return;
  try {
    const done = await deps.store.write((w) => {
      const current = w.get(seen.id);
      if (current?.lock?.session !== lease.session) return null;
      const next: Upload = { ...current, state: 'done', lock: null, updatedAt: deps.now() };
      w.put(next);
      return next;
    });
    if (done && done.conflict !== 'rename') deps.completed({ user: done.user, app: done.app, path: deps.root.appPath(done.user, done.target), size: done.fileSize }, done.id);
  } finally {
    lease.end();
  }
}

/**
 * Unfinished uploads idle past `idleMs` go, with their bytes; one being written never does. The
 * record is removed only if it is still the one read (a PATCH in between makes it not idle).
 *
 * One whole but unpublished (a `finish` cut between recording the full size and the rename: a
 * crash, or a pause that outlived its lease, after `recover`'s two runs) is published here
 * instead: every byte of it was acknowledged, and a POST already answers it as whole.
 */
export async function sweep(deps: UploadDeps, idleMs: number): Promise<void> {
  const now = deps.now();
  for (const u of deps.store.all()) {
    if (u.lock && deps.locks.alive(u.lock)) continue;
    if (u.state === 'active' && completes(u, u.offset)) {
      await recoverOne(deps, u).catch(() => undefined);
      // Published: done here. One that cannot land (conflict=fail and the target is there) is
      // still swept once idle, as before.
      if (deps.store.get(u.id)?.state !== 'active') continue;
    }
    if (now - u.updatedAt <= idleMs) continue;
    const removed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (!current || current.updatedAt !== u.updatedAt || (current.lock && deps.locks.alive(current.lock))) return false;
      w.remove(current);
      return true;
    });
    if (removed) await removePart(u.part);
  }
}

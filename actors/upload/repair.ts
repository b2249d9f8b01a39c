import { createPart, cutBack, partExists, partSize } from './files.js';
import { finish } from './finish.js';
import type { UploadDeps } from './deps.js';
import { completes, type Upload } from './store.js';

/**
 * Repairs one upload a crash or a stall left behind, under a lock of its own taken only if the
 * record is still the one read: the offset becomes that of what is on disk (bytes past the recorded
 * offset are cut off: they may be a torn write), and a whole one is published. A failure to publish
 * (conflict=fail, the target taken) is thrown: the caller says it, or goes on.
 */
export async function repair(deps: UploadDeps, seen: Upload): Promise<void> {
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
    const whole = completes(u, offset);
    const fixed = await deps.store.write((w) => {
      const current = w.get(u.id);
      if (current?.lock?.session !== lease.session) return null;
      // A whole one keeps this lock until it is published (finish's done record lets it go), so
      // nobody else (another replica repairing it, an asker) publishes it at the same time.
      const next: Upload = { ...current, offset, lock: whole ? current.lock : null };
      w.put(next);
      return next;
    });
    if (fixed && whole) await finish(deps, fixed, lease);
  } finally {
    lease.end();
  }
}

/**
 * A record at the full size whose part is gone: the crash came after the part was renamed to its
 * target and before the record said done (finish.ts records the size first). It is done;
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

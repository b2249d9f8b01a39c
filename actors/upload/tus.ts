import { ErrorReasons, PierError } from '../../bus/errors.js';
import type { CreateUpload, Created, TusUploadState } from '../../bus/subjects.js';
import type { UploadDeps } from './deps.js';
import { checkCreation, invalidId, publishCreatedWhole, newUpload, settledUpload, tooManyUnfinished } from './handler.js';
import { lockLost } from './lock.js';
import { removePart } from './files.js';
import { recordOf, type Upload } from './store.js';

/**
 * The tus side of the upload engine (docs/upload.md "tus 1.0 (`/tus/`)"): the same checks, records, locks,
 * sessions and publication as section 7's protocol (handler.ts, session.ts); what differs is
 * that every creation makes an upload of its own (no resume by POST: tus clients resume by URL),
 * that the length may come later, and that a client may end an upload (termination).
 */

/** Every creation here makes a file: a path naming a folder is refused (by reason: the edge says it in tus words). */
const notAFile = () => new PierError('BAD_REQUEST', 'file_relative_path: must name a file, not a folder', { reason: ErrorReasons.NOT_A_FILE });

/** tus `POST /tus/`: checks as section 7 does, then a new upload (a deferred length is the manifest's cap until declared). */
export async function createTusUpload(deps: UploadDeps, req: CreateUpload, idleMs: number): Promise<Created> {
  if (req.protocol !== 'tus') throw new PierError('BAD_REQUEST', 'protocol: must be tus');
  if (req.relativePath === '' || req.relativePath.endsWith('/')) throw notAFile();
  const { options, dest, target } = await checkCreation(deps, { ...req, fileSize: req.lengthDeferred ? 0 : req.fileSize });
  if (target === null) throw notAFile();
  const fileSize = req.lengthDeferred ? options.limitedSize : req.fileSize;
  const u = await newUpload(deps, { ...req, fileSize, lengthDeferred: req.lengthDeferred === true }, dest, target);
  const created = await deps.store.write((w) => {
    if ((fileSize > 0 || u.lengthDeferred) && w.countUnfinished(req.user, req.app) >= deps.maxUnfinished) return false;
    w.put(u);
    return true;
  });
  if (!created) {
    await removePart(u.part);
    throw tooManyUnfinished(deps);
  }
  if (!u.lengthDeferred && fileSize === 0) {
    const published = await publishCreatedWhole(deps, u);
    return { record: recordOf(published), complete: published.state === 'done', tus: stateOf(published, idleMs) };
  }
  return { record: recordOf(u), complete: false, tus: stateOf(u, idleMs) };
}

export function stateOf(u: Upload, idleMs: number): TusUploadState {
  const complete = u.state === 'done';
  return {
    record: recordOf(u),
    lengthDeferred: u.lengthDeferred === true,
    metadata: u.metadata ?? '',
    expiresAt: complete ? null : u.updatedAt + idleMs,
    complete,
  };
}

/** tus `HEAD /tus/<id>`: answered once a PATCH in flight has settled, as section 7's GET is. */
export async function describeTusUpload(deps: UploadDeps, user: string, app: string, id: string, idleMs: number): Promise<TusUploadState> {
  return stateOf(await settledUpload(deps, user, app, id, 'tus'), idleMs);
}

/**
 * tus `DELETE /tus/<id>`: an unfinished upload goes with its partial data, under its lock (a PATCH
 * in flight is waited for, then 409 `upload busy` as for a second PATCH). A finished one has no
 * partial data left: it is not found (its file stays where it landed).
 */
export async function terminateTusUpload(deps: UploadDeps, user: string, app: string, id: string): Promise<{ terminated: boolean }> {
  const mine = (u: Upload | undefined): u is Upload => u !== undefined && u.user === user && u.app === app && u.protocol === 'tus' && u.state === 'active';
  if (!mine(await deps.store.read((r) => r.get(id)))) throw invalidId();
  const admit = (u: Upload | undefined): u is Upload => {
    if (!mine(u)) throw invalidId();
    return true;
  };
  const lease = (await deps.locks.takeWhenSettled(id, admit, { touch: false }))!;
  try {
    const removed = await deps.store.write((w) => {
      const current = w.get(id);
      if (!lease.holds(current)) return false;
      w.remove(current!);
      return true;
    });
    if (!removed) throw lockLost();
    await removePart(lease.upload.part);
  } finally {
    lease.end();
  }
  return { terminated: true };
}

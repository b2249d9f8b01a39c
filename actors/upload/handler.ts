import { UploadTexts } from '../../bus/upload-texts.js';
import { randomBytes } from 'node:crypto';
import { lstat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { ErrorReasons, PierError, type ErrorReason } from '../../bus/errors.js';
import type { BeginWrite, CreateUpload, Created, UploadRecord } from '../../bus/subjects.js';
import { typeRefusal } from './file-types.js';
import { createPart, partPathFor, removePart } from './files.js';
import { assertReachable, checkStoragePath, resolveTarget } from './paths.js';
import type { UploadDeps } from './deps.js';
import { uploadBusy, type Lease } from './lock.js';
import { repair } from './repair.js';
import { completes, recordOf, type Upload } from './store.js';

export const invalidId = () => new PierError('BAD_REQUEST', UploadTexts.INVALID_UPLOAD_ID, { reason: ErrorReasons.UPLOAD_UNKNOWN });
export const invalidOffset = (u: Upload) => new PierError('BAD_REQUEST', UploadTexts.INVALID_OFFSET, { data: recordOf(u), reason: ErrorReasons.OFFSET_MISMATCH });

function uploadOptions(deps: UploadDeps, user: string, appName: string) {
  const app = deps.cache.app(user, appName);
  if (!app) throw new PierError('NOT_FOUND', `app "${appName}" is not installed for "${user}"`);
  if (!app.upload) throw new PierError('BAD_REQUEST', `app "${appName}" has no upload option in its manifest`);
  return app.upload;
}

/**
 * A folder entry (docs/protocol.md "Upload"): `storage_path` names the folder to create, with no file
 * fields. Its parent must be an existing folder inside `dest`; `dest` itself is simply there.
 */
async function createFolderEntry(deps: UploadDeps, req: CreateUpload, dest: string): Promise<Created> {
  const top = deps.root.userFolder(req.user);
  const folder = deps.root.hostPath(req.user, req.storagePath);
  if (folder === dest) {
    await assertReachable(top, dest);
  } else {
    await resolveTarget(top, dest, dirname(folder), `${basename(folder)}/`);
  }
  return { record: null, complete: false };
}

/** What every creation checks, in both protocols: the app's options, the type, the size, the target inside `dest`. */
export async function checkCreation(deps: UploadDeps, req: CreateUpload) {
  const options = uploadOptions(deps, req.user, req.app);
  checkStoragePath(req.storagePath);
  const top = deps.root.userFolder(req.user);
  const dest = deps.root.hostPath(req.user, options.dest);
  if (req.relativePath === '') return { options, top, dest, target: null, folderEntry: true };
  // A folder has no type: only files are checked against the manifest's fileType.
  const refusal = req.relativePath.endsWith('/') ? null : typeRefusal(options.fileType, req.fileType, req.relativePath);
  if (refusal) throw new PierError('BAD_REQUEST', refusal);
  if (req.fileSize > options.limitedSize) throw new PierError('BAD_REQUEST', `file_size: must be at most ${options.limitedSize} bytes`);
  const { target, folder } = await resolveTarget(top, dest, deps.root.hostPath(req.user, req.storagePath), req.relativePath);
  return { options, top, dest, target: folder ? null : target, folderEntry: false };
}

/** A new upload record and its empty part file inside `dest`. */
export async function newUpload(deps: UploadDeps, req: CreateUpload, dest: string, target: string): Promise<Upload> {
  const id = randomBytes(16).toString('base64url');
  // `dest` is its own real path: the walk came down to it from the user's folder without a link.
  const part = partPathFor(dest, id);
  await createPart(part, deps.root.userFolder(req.user));
  const now = deps.now();
  return {
    ...req, id, offset: 0, target, part, state: 'active', createdAt: now, updatedAt: now, lock: null,
  };
}

export const tooManyUnfinished = (deps: UploadDeps) =>
  new PierError('RATE_LIMITED', `too many unfinished uploads for this app (${deps.maxUnfinished}): finish some, or let them expire`);

/** `POST /upload/`: checks everything, creates the folder or the upload (or returns the unfinished one). */
export async function createUpload(deps: UploadDeps, req: CreateUpload): Promise<Created> {
  if (req.protocol === 'tus') throw new PierError('BAD_REQUEST', 'protocol: a tus upload is created through its own endpoint');
  const { dest, target, folderEntry } = await checkCreation(deps, req);
  if (folderEntry) return createFolderEntry(deps, req, dest);
  if (target === null) return { record: null, complete: false };

  const existingId = (await deps.store.read((r) => r.unfinishedAt(req.user, req.app, target)))?.id;
  const settled = existingId ? await deps.locks.settled(existingId) : undefined;
  if (settled && settled.fileSize === req.fileSize) {
    // Unfinished when this POST came, finished while it waited for the PATCH in progress: the
    // resume's answer is that it is complete (not a new upload of the same file, nor a numbered copy).
    if (settled.state === 'done') return { record: recordOf(settled), complete: true };
    if (settled.state === 'active') {
      const existing = await publishedIfWhole(deps, settled);
      if (existing.state === 'done') return { record: recordOf(existing), complete: true };
      // A resume is a sign of life: the idle clock starts again (a client resuming after a writer
      // restarted could otherwise see its upload swept between this answer and its next PATCH).
      return { record: recordOf(await resumed(deps, existing)), complete: false };
    }
  }
  // lstat: a link at the target exists as a link, wherever it points (no oracle for its pointee).
  if (req.conflict === 'fail' && (await lstat(target).catch(() => null))) throw new PierError('CONFLICT', 'the target file exists (conflict=fail)');

  const { protocol: _p, lengthDeferred: _l, metadata: _m, ...platform } = req;
  const u = await newUpload(deps, platform, dest, target);
  const { id, part } = u;
  // Two POSTs racing for one target: the first to commit wins, the other answers with it. The cap on
  // unfinished uploads is counted inside the same transaction, so concurrent POSTs cannot pass it.
  let cancelled: string | null = null;
  const winner = await deps.store.write((w) => {
    cancelled = null;
    const current = w.unfinishedAt(req.user, req.app, target);
    if (current && current.state === 'active' && current.fileSize === req.fileSize) return current;
    if (!current && req.fileSize > 0 && w.countUnfinished(req.user, req.app) >= deps.maxUnfinished) return null;
    if (current && current.state === 'active') {
      // Same target, another size: a different file now; the old unfinished one is cancelled.
      w.remove(current);
      cancelled = current.part;
    }
    w.put(u);
    return u;
  });
  // The cancelled one's bytes go once its record is gone, before the answer (a write tried again
  // runs its function again: removing them inside it would remove them for a try that lost).
  if (cancelled !== null && winner?.id === id) await removePart(cancelled);
  if (winner?.id !== id) await removePart(part);
  if (winner === null) throw tooManyUnfinished(deps);
  if (winner.id !== id) return { record: recordOf(winner), complete: false };
  if (req.fileSize === 0) {
    const published = await publishCreatedWhole(deps, u);
    return { record: recordOf(published), complete: published.state === 'done' };
  }
  return { record: recordOf(u), complete: false };
}

/** `u` with its idle clock restarted now, unless it changed meanwhile (then as it is now). */
async function resumed(deps: UploadDeps, u: Upload): Promise<Upload> {
  return deps.store.write((w) => {
    const current = w.get(u.id);
    if (!current || current.state !== 'active' || current.updatedAt !== u.updatedAt) return current ?? u;
    const touched = { ...current, updatedAt: Math.max(current.updatedAt, deps.now()) };
    w.put(touched);
    return touched;
  });
}

/**
 * An upload of this user and app, created with this protocol, once no PATCH holds it (or the
 * settle wait passed). Anyone else's, or one of the other protocol: `Invalid upload ID`.
 */
export async function settledUpload(deps: UploadDeps, user: string, app: string, id: string, protocol: 'tus' | undefined): Promise<Upload> {
  const owned = (u: Upload | undefined): u is Upload => u !== undefined && u.user === user && u.app === app && u.protocol === protocol;
  if (!owned(await deps.store.read((r) => r.get(id)))) throw invalidId();
  const u = await deps.locks.settled(id);
  if (!owned(u)) throw invalidId();
  return publishedIfWhole(deps, u);
}

/**
 * Publishes an upload whole at its creation (zero bytes), under a lock of its own as a repair
 * does: a POST racing this one for the same target finds it locked, not free to publish it too.
 */
export const publishWhole = (deps: UploadDeps, u: Upload): Promise<void> => repair(deps, u);

/**
 * A whole upload just created (a zero-byte file) published before it is answered complete. The
 * sweep, which publishes whole uploads a crash left behind, may take it first (it then holds the
 * lock, and `publishWhole` here does nothing): wait for that one's publication, never answer
 * "complete" before the file is at its target (409 `upload busy` after the settle wait).
 */
export async function publishCreatedWhole(deps: UploadDeps, u: Upload): Promise<Upload> {
  await publishWhole(deps, u);
  return publishedIfWhole(deps, (await deps.locks.settled(u.id)) ?? u);
}

/**
 * An answer at the full size tells the client its file is at its target, so an upload found whole
 * but not published (its finish was cut by a crash, or by a stall past the settle wait) is published
 * before anyone is told its offset. One a live writer still holds: 409 `upload busy`, ask again;
 * one that cannot land (conflict=fail, the target taken): that error.
 */
async function publishedIfWhole(deps: UploadDeps, u: Upload): Promise<Upload> {
  if (u.state !== 'active' || !completes(u, u.offset)) return u;
  if (u.lock && deps.locks.alive(u.lock)) throw uploadBusy();
  await repair(deps, u);
  const now = deps.store.get(u.id) ?? u;
  if (now.state === 'active' && completes(now, now.offset)) throw uploadBusy();
  return now;
}

export async function getUpload(deps: UploadDeps, user: string, app: string, id: string): Promise<UploadRecord> {
  return recordOf(await settledUpload(deps, user, app, id, undefined));
}

/**
 * Takes the upload's lock for one PATCH, after the spec's checks (id, offset), once a PATCH in
 * progress has settled (lock.ts): 409 `upload busy` when another one still holds it after the wait.
 *
 * The wait matters: a client whose connection broke mid-PATCH re-POSTs at once, often before the
 * edge has even seen the break, and sends its next PATCH right after. The re-POST (or GET) must
 * answer the offset after that PATCH's bytes are settled (fsynced and recorded), and the next PATCH
 * must find the lock released, or the client is told a stale offset or `upload busy` for a PATCH
 * that is already dead.
 */
export async function lockForWrite(deps: UploadDeps, req: BeginWrite): Promise<Lease> {
  const owned = (u: Upload | undefined): u is Upload => u !== undefined && u.user === req.user && u.app === req.app && u.protocol === req.protocol;
  // A finished upload: section 7 knows no such upload; tus answers its offset (409 with the length),
  // so a client whose last answer was lost learns the upload is complete rather than gone.
  const checkMine = (u: Upload | undefined): u is Upload => {
    if (!owned(u)) throw invalidId();
    if (u.state !== 'active') throw req.protocol === 'tus' ? invalidOffset(u) : invalidId();
    return true;
  };
  checkMine(await deps.store.read((r) => r.get(req.id))); // before waiting: another's upload tells nothing
  const admit = (u: Upload | undefined): u is Upload => {
    if (!checkMine(u)) return false;
    if (req.offset !== null && u.offset !== req.offset) throw invalidOffset(u);
    if (req.length != null) checkDeclaredLength(u, req.length);
    return true;
  };
  const change = req.length != null ? (u: Upload): Upload => ({ ...u, fileSize: req.length!, lengthDeferred: false }) : undefined;
  return (await deps.locks.takeWhenSettled(req.id, admit, { touch: true, change }))!;
}

/**
 * A length declared on a PATCH (tus `Upload-Length`): declares a deferred length once, at least what
 * is written and at most the cap. Refused by reason, with the figure: the edge says it in its protocol's words.
 */
function checkDeclaredLength(u: Upload, length: number): void {
  const refused = (message: string, reason: ErrorReason, bytes: number) => new PierError('BAD_REQUEST', `file_size: ${message}`, { data: { bytes }, reason });
  if (!u.lengthDeferred) {
    if (length !== u.fileSize) throw refused(`the upload's length is ${u.fileSize} and cannot change`, ErrorReasons.LENGTH_FIXED, u.fileSize);
    return;
  }
  if (length < u.offset) throw refused(`${u.offset} bytes are already written`, ErrorReasons.LENGTH_BELOW_OFFSET, u.offset);
  if (length > u.fileSize) throw refused(`must be at most ${u.fileSize} bytes`, ErrorReasons.LENGTH_OVER_MAX, u.fileSize);
}

import { randomBytes } from 'node:crypto';
import { realpath, stat } from 'node:fs/promises';
import { PierError } from '../../bus/errors.js';
import type { BeginWrite, CreateUpload, Created, UploadCompleted, UploadRecord } from '../../bus/subjects.js';
import type { RegistryCache } from '../../lib/registry-cache.js';
import { createPart, partPathFor, publish, removePart } from './files.js';
import { resolveTarget, typeAllowed } from './paths.js';
import { recordOf, UploadStore, type Upload } from './store.js';

export interface UploadDeps {
  store: UploadStore;
  cache: RegistryCache;
  busId: string;
  now: () => number;
  chunkMaxBytes: number;
  leaseMs: number;
  completed: (ev: UploadCompleted) => void;
  /** Whether a lock is held by a write session that is still alive (its lease running, its replica up). */
  lockAlive: (lock: NonNullable<Upload['lock']>) => boolean;
}

export const invalidId = () => new PierError('BAD_REQUEST', 'Invalid upload ID');

function uploadOptions(deps: UploadDeps, user: string, appName: string) {
  const app = deps.cache.app(user, appName);
  if (!app) throw new PierError('NOT_FOUND', `app "${appName}" is not installed for "${user}"`);
  if (!app.upload) throw new PierError('BAD_REQUEST', `app "${appName}" has no upload option in its manifest`);
  return app.upload;
}

/** Publishes a complete upload at its target and marks it done (inside the caller's error handling). */
export async function finish(deps: UploadDeps, u: Upload): Promise<string> {
  const landed = await publish(u.part, u.target, u.conflict);
  await deps.store.root.transaction(() => {
    deps.store.uploads.put(u.id, { ...u, offset: u.fileSize, state: 'done', lock: null, updatedAt: deps.now() });
    deps.store.byTarget.remove(UploadStore.targetKey(u.user, u.app, u.target));
  });
  deps.completed({ user: u.user, app: u.app, path: landed, size: u.fileSize });
  return landed;
}

/** `POST /upload/`: checks everything, creates the folder or the upload (or returns the unfinished one). */
export async function createUpload(deps: UploadDeps, req: CreateUpload): Promise<Created> {
  const options = uploadOptions(deps, req.user, req.app);
  if (!typeAllowed(options.fileType, req.fileType)) throw new PierError('BAD_REQUEST', `file_type: "${req.fileType}" is not allowed (allowed: ${options.fileType.join(', ')})`);
  if (req.fileSize > options.limitedSize) throw new PierError('BAD_REQUEST', `file_size: must be at most ${options.limitedSize} bytes`);
  const { target, folder } = await resolveTarget(options.dest, req.storagePath, req.relativePath);
  if (folder) return { record: null, complete: false };

  const key = UploadStore.targetKey(req.user, req.app, target);
  const existingId = deps.store.byTarget.get(key);
  const existing = existingId ? deps.store.uploads.get(existingId) : undefined;
  if (existing && existing.state === 'active' && existing.fileSize === req.fileSize) return { record: recordOf(existing), complete: false };
  if (req.conflict === 'fail' && (await stat(target).catch(() => null))) throw new PierError('CONFLICT', 'the target file exists (conflict=fail)');

  const id = randomBytes(16).toString('base64url');
  const part = partPathFor(await realpath(options.dest), id);
  await createPart(part);
  const now = deps.now();
  const u: Upload = {
    id, user: req.user, app: req.app, storagePath: req.storagePath, relativePath: req.relativePath, fileType: req.fileType,
    fileSize: req.fileSize, offset: 0, target, part, conflict: req.conflict, state: 'active', createdAt: now, updatedAt: now, lock: null,
  };
  // Two POSTs racing for one target: the first to commit wins, the other answers with it.
  const winner = await deps.store.root.transaction(() => {
    const currentId = deps.store.byTarget.get(key);
    const current = currentId ? deps.store.uploads.get(currentId) : undefined;
    if (current && current.state === 'active' && current.fileSize === req.fileSize) return current;
    if (current && current.state === 'active') {
      // Same target, another size: a different file now; the old unfinished one is cancelled.
      deps.store.uploads.remove(current.id);
      void removePart(current.part);
    }
    deps.store.uploads.put(id, u);
    deps.store.byTarget.put(key, id);
    return u;
  });
  if (winner.id !== id) {
    await removePart(part);
    return { record: recordOf(winner), complete: false };
  }
  if (req.fileSize === 0) {
    await finish(deps, u);
    return { record: recordOf(u), complete: true };
  }
  return { record: recordOf(u), complete: false };
}

export function getUpload(deps: UploadDeps, user: string, app: string, id: string): UploadRecord {
  const u = deps.store.uploads.get(id);
  if (!u || u.user !== user || u.app !== app) throw invalidId();
  return recordOf(u);
}

/** Takes the upload's lock for one PATCH, after the spec's checks (id, offset), or 409 `upload busy`. */
export async function lockForWrite(deps: UploadDeps, req: BeginWrite, session: string): Promise<Upload> {
  return deps.store.root.transaction(() => {
    const u = deps.store.uploads.get(req.id);
    if (!u || u.user !== req.user || u.app !== req.app || u.state !== 'active') throw invalidId();
    if (u.offset !== req.offset) throw new PierError('BAD_REQUEST', 'Invalid offset', { data: recordOf(u) });
    const now = deps.now();
    if (u.lock && deps.lockAlive(u.lock)) throw new PierError('CONFLICT', 'upload busy');
    const locked: Upload = { ...u, lock: { owner: deps.busId, session, until: now + deps.leaseMs }, updatedAt: now };
    deps.store.uploads.put(u.id, locked);
    return locked;
  });
}

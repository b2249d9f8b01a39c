import { lstat } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { PierError } from '../../bus/errors.js';
import { PARTS_DIR as PARTS_FOLDER } from './files.js';
import { walkDown } from './walk.js';

const bad = (field: string, why: string) => new PierError('BAD_REQUEST', `${field}: ${why}`);

/** True when `child` is `parent` or below it (both already resolved). */
export function inside(parent: string, child: string): boolean {
  const r = relative(parent, child);
  return r === '' || (!r.startsWith('..') && !isAbsolute(r) && !r.startsWith(`..${sep}`));
}

/** Checks `file_relative_path` as text: what must never reach the filesystem at all. */
export function checkRelativePath(rel: string): void {
  const field = 'file_relative_path';
  if (rel === '' || rel === '/') throw bad(field, 'must name a file or a folder');
  if (rel.includes('\0')) throw bad(field, 'must not contain NUL');
  if (rel.includes('\\')) throw bad(field, 'must not contain a backslash');
  if (/[\u0001-\u001f\u007f]/.test(rel)) throw bad(field, 'must not contain control characters');
  if (rel.startsWith('/') || /^[A-Za-z]:/.test(rel)) throw bad(field, 'must be relative to storage_path');
  if (/%(2e|2f|5c|00)/i.test(rel)) throw bad(field, 'must not contain encoded dots, slashes or NUL');
  const segments = rel.replace(/\/$/, '').split('/');
  if (segments.some((s) => s === '..' || s === '.')) throw bad(field, 'must not contain . or .. segments');
  if (segments.some((s) => s === '')) throw bad(field, 'must not contain empty segments (//)');
  if (segments.some((s) => Buffer.byteLength(s) > 255)) throw bad(field, 'has a name longer than 255 bytes');
  if (segments.includes(PARTS_FOLDER)) throw bad(field, `must not name ${PARTS_FOLDER} (Pier's partial files)`);
}

/** `storage_path` as text, in the app's view: absolute, no NUL (symlinks are `resolveTarget`'s job). */
export function checkStoragePath(storagePath: string): void {
  if (storagePath === '' || storagePath.includes('\0')) throw bad('storage_path', 'is required');
  if (!storagePath.startsWith('/')) throw bad('storage_path', 'must be an absolute path');
  if (storagePath.split('/').includes(PARTS_FOLDER)) throw bad('storage_path', `must not name ${PARTS_FOLDER} (Pier's partial files)`);
}

export interface ResolvedTarget {
  /** Absolute path of the file (or folder) to create, its parent folders existing and inside `dest`. */
  target: string;
  folder: boolean;
}

// One answer for "missing", "not a folder", "a link" and "outside": which of them holds would tell
// the caller whether a host path exists (docs/protocol.md "Upload").
const storageRefused = () => bad('storage_path', "must be an existing folder inside the app's upload folder, reached without links");
const pathRefused = () => bad('file_relative_path', "must lead through folders inside the app's upload folder (no links, no files on the way)");

/**
 * Where an upload lands. `userFolder`, `dest` and `storagePath` are host paths (the app's view
 * mapped by `UploadRoot`, under a root that is its own real path). The walk goes from the user's
 * folder to `dest`, from `dest` to `storage_path`, and from there to the target's folder, creating
 * missing folders one at a time below `storage_path` (and `dest` itself, made at install), never
 * through a symlink (`walk.ts`).
 */
export async function resolveTarget(userFolder: string, dest: string, storagePath: string, rel: string): Promise<ResolvedTarget> {
  checkStoragePath(storagePath);
  checkRelativePath(rel);
  if (!inside(userFolder, dest)) throw storageRefused();
  await walkDown(userFolder, dest, { create: true, refused: storageRefused });
  await walkDown(dest, storagePath, { create: false, refused: storageRefused });
  const folder = rel.endsWith('/');
  const segments = rel.replace(/\/$/, '').split('/');
  const parent = join(storagePath, ...(folder ? segments : segments.slice(0, -1)));
  await walkDown(storagePath, parent, { create: true, refused: pathRefused });
  if (folder) return { target: parent, folder };
  const target = join(parent, segments.at(-1)!);
  // lstat: what a link at the target points at is never looked at (nor told).
  const existing = await lstat(target).catch(() => null);
  if (existing?.isDirectory()) throw bad('file_relative_path', 'names an existing folder');
  return { target, folder };
}

/**
 * The same walk again, from the user's folder to the target's folder: every PATCH and the
 * publication check that nothing on the way was swapped for a link since the POST.
 */
export async function stillInside(userFolder: string, folder: string): Promise<boolean> {
  return assertReachable(userFolder, folder).then(
    () => true,
    () => false,
  );
}

/** `stillInside`, refusing with the one `storage_path` answer when it is not. */
export function assertReachable(userFolder: string, folder: string): Promise<void> {
  return walkDown(userFolder, folder, { create: false, refused: storageRefused });
}

import { lstat, mkdir, realpath, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { PierError } from '../../bus/errors.js';

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
}

/** `storage_path` as text, in the app's view: absolute, no NUL (symlinks are `resolveTarget`'s job). */
export function checkStoragePath(storagePath: string): void {
  if (storagePath === '' || storagePath.includes('\0')) throw bad('storage_path', 'is required');
  if (!storagePath.startsWith('/')) throw bad('storage_path', 'must be an absolute path');
}

export interface ResolvedTarget {
  /** The resolved storage folder. */
  storageReal: string;
  /** Absolute path of the file (or folder) to create, its parent folders existing and inside `dest`. */
  target: string;
  folder: boolean;
}

/**
 * Resolves where an upload lands (`dest` and `storagePath` are host paths here), following symlinks, and creates the missing folders one by one
 * so that nothing is ever created outside `dest` (a symlink inside `dest` pointing out is refused).
 */
export async function resolveTarget(dest: string, storagePath: string, rel: string): Promise<ResolvedTarget> {
  checkStoragePath(storagePath);
  checkRelativePath(rel);
  await mkdir(dest, { recursive: true });
  const destReal = await realpath(dest);
  // One answer for "missing", "not a folder" and "outside": which of them holds would tell the
  // caller whether a host path exists (CONTRACT.md section 7).
  const refused = () => bad('storage_path', "must be an existing folder inside the app's upload folder");
  const storageReal = await realpath(storagePath).catch(() => null);
  if (storageReal === null || !inside(destReal, storageReal)) throw refused();
  if (!(await stat(storageReal)).isDirectory()) throw refused();

  const folder = rel.endsWith('/');
  const segments = rel.replace(/\/$/, '').split('/');
  const parents = folder ? segments : segments.slice(0, -1);
  let current = storageReal;
  for (const segment of parents) {
    const next = join(current, segment);
    let info;
    try {
      info = await lstat(next);
    } catch {
      await mkdir(next).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      info = await lstat(next);
    }
    if (info.isSymbolicLink()) {
      const real = await realpath(next);
      if (!inside(destReal, real)) throw bad('file_relative_path', "leads outside the app's upload folder");
      if (!(await stat(real)).isDirectory()) throw bad('file_relative_path', `"${segment}" is not a folder`);
      current = real;
    } else if (info.isDirectory()) {
      current = next;
    } else {
      throw bad('file_relative_path', `"${segment}" is not a folder`);
    }
  }
  if (folder) return { storageReal, target: current, folder };
  const target = resolve(current, segments.at(-1)!);
  if (!inside(destReal, dirname(target))) throw bad('file_relative_path', "leads outside the app's upload folder");
  const existing = await lstat(target).catch(() => null);
  if (existing?.isDirectory()) throw bad('file_relative_path', 'names an existing folder');
  return { storageReal, target, folder };
}

/** The extension of a path's last segment, without its dot (`report.PDF` → `PDF`); '' when it has none. */
function extensionOf(path: string): string {
  const name = path.split('/').at(-1) ?? '';
  const dot = name.lastIndexOf('.');
  return dot > 0 ? name.slice(dot + 1) : '';
}

/**
 * `fileType` of the manifest against the request's `file_type` (CONTRACT.md section 7):
 * case-insensitive, leading dot ignored, `*` for any. A MIME type (`application/pdf`) or an empty
 * `file_type` means "the file name's extension": a name without one is allowed only by `*`.
 */
export function typeAllowed(allowed: string[], fileType: string, relativePath: string): boolean {
  const norm = (t: string) => t.trim().toLowerCase().replace(/^\./, '');
  const declared = norm(fileType);
  const wanted = declared === '' || declared.includes('/') ? norm(extensionOf(relativePath)) : declared;
  return allowed.some((a) => a === '*' || (wanted !== '' && norm(a) === wanted));
}

import { constants } from 'node:fs';
import { link, lstat, mkdir, open, realpath, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { PierError } from '../../bus/errors.js';
import type { ConflictPolicy } from '../../bus/subjects.js';

/** Where unfinished uploads keep their bytes: inside `dest`, so publishing is a rename on one filesystem. */
export const PARTS_DIR = '.pier-uploads';

export function partPathFor(destReal: string, id: string): string {
  return join(destReal, PARTS_DIR, `${id}.part`);
}

/** fsync of a folder: makes a rename or a new file in it durable. */
export async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, constants.O_RDONLY);
  try {
    await fd.sync();
  } finally {
    await fd.close();
  }
}

const tampered = () => new PierError('BAD_REQUEST', "the upload's partial data was moved or replaced: upload the file again");

/**
 * The parts folder lives inside `dest`, which the app can write: it could swap the folder or a
 * part for a symlink to make Pier write elsewhere. So the folder must still be itself (no symlink
 * on the way: its real path is its path) and a part is never opened through a symlink (O_NOFOLLOW).
 */
async function checkPartsFolder(part: string): Promise<void> {
  const dir = dirname(part);
  if ((await realpath(dir).catch(() => null)) !== dir) throw tampered();
}

/** Opens a part for writing, never through a symlink. */
export async function openPart(part: string, flags = constants.O_RDWR): Promise<FileHandle> {
  await checkPartsFolder(part);
  try {
    return await open(part, flags | constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw tampered();
    throw err;
  }
}

export async function createPart(part: string): Promise<void> {
  // Only Pier looks inside: partial files are not for the app to read.
  await mkdir(dirname(part), { recursive: true, mode: 0o700 });
  const fd = await openPart(part, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC);
  await fd.sync();
  await fd.close();
  await syncDir(dirname(part));
}

/** The size really on disk (0 when the part is gone or is not a plain file). */
export async function partSize(part: string): Promise<number> {
  const info = await lstat(part).catch(() => null);
  return info?.isFile() ? info.size : 0;
}

export async function cutBack(part: string, size: number): Promise<void> {
  const fd = await openPart(part, constants.O_WRONLY);
  try {
    await fd.truncate(size);
  } finally {
    await fd.close();
  }
}

/**
 * The target's folder is still the one resolved at POST (its real path then): a folder on the way
 * swapped for a symlink since would make the rename land outside `dest` (CONTRACT.md section 7).
 */
export async function targetInPlace(target: string): Promise<boolean> {
  const dir = dirname(target);
  return (await realpath(dir).catch(() => null)) === dir;
}

export async function removePart(part: string): Promise<void> {
  await unlink(part).catch(() => undefined);
}

/** `name (n).ext` for the first n free at the time of asking. */
function numbered(target: string, n: number): string {
  const ext = extname(target);
  return join(dirname(target), `${basename(target, ext)} (${n})${ext}`);
}

/**
 * Publishes a complete part at its target, atomically: `replace` renames over any old file;
 * `fail` and `rename` link without overwriting (EEXIST is the check, so no race), then drop the part.
 * The folder is fsynced, so the new name survives a crash. Returns the path it landed at.
 */
export async function publish(part: string, target: string, conflict: ConflictPolicy): Promise<string> {
  await checkPartsFolder(part);
  if (!(await lstat(part).catch(() => null))?.isFile()) throw tampered();
  if (conflict === 'replace') {
    await rename(part, target);
    await syncDir(dirname(target));
    return target;
  }
  for (let n = 0; n < 10_000; n++) {
    const candidate = n === 0 ? target : numbered(target, n);
    try {
      await link(part, candidate);
      await unlink(part);
      await syncDir(dirname(target));
      await syncDir(dirname(part));
      return candidate;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (conflict === 'fail') throw new PierError('CONFLICT', 'the target file exists (conflict=fail)');
    }
  }
  throw new PierError('CONFLICT', 'no free name for the target file');
}

import { constants } from 'node:fs';
import { link, lstat, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { PierError } from '../../bus/errors.js';
import type { ConflictPolicy } from '../../bus/subjects.js';
import { walkDown } from './walk.js';

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
 * The parts folder lives inside `dest`, which the app can write: it could swap the folder, or a
 * folder above it, for a symlink to make Pier write elsewhere, or put a hard link to a file
 * elsewhere where a part is. So the folder is reached from the user's folder (`top`) without any
 * link on the way (`walk.ts`), a part is never opened through a symlink (O_NOFOLLOW), and a part
 * with another name for it (a link count above one) is never written.
 */
async function checkPartsFolder(part: string, top: string): Promise<void> {
  await walkDown(top, dirname(part), { create: false, refused: tampered });
}

/** Opens an existing part for writing: never through a symlink, never one that is also another file. */
export async function openPart(part: string, top: string, flags = constants.O_RDWR): Promise<FileHandle> {
  await checkPartsFolder(part, top);
  let fd: FileHandle;
  try {
    fd = await open(part, flags | constants.O_NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw tampered();
    throw err;
  }
  const info = await fd.stat().catch(() => null);
  if (!info?.isFile() || info.nlink !== 1) {
    await fd.close();
    throw tampered();
  }
  return fd;
}

/** A new, empty part: whatever is at its name (a planted link, say) is removed first, then made afresh (O_EXCL). */
export async function createPart(part: string, top: string): Promise<void> {
  // Only Pier looks inside: partial files are not for the app to read.
  await mkdir(dirname(part), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  await checkPartsFolder(part, top);
  await unlink(part).catch(() => undefined);
  const fd = await open(part, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644).catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'EEXIST' || err.code === 'ELOOP' ? tampered() : err;
  });
  await fd.sync();
  await fd.close();
  await syncDir(dirname(part));
}

/** The size really on disk (0 when the part is gone or is not a plain file). */
export async function partSize(part: string): Promise<number> {
  const info = await lstat(part).catch(() => null);
  return info?.isFile() ? info.size : 0;
}

export async function cutBack(part: string, size: number, top: string): Promise<void> {
  const fd = await openPart(part, top, constants.O_WRONLY);
  try {
    await fd.truncate(size);
  } finally {
    await fd.close();
  }
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
export async function publish(part: string, target: string, conflict: ConflictPolicy, top: string): Promise<string> {
  await checkPartsFolder(part, top);
  const info = await lstat(part).catch(() => null);
  if (!info?.isFile() || info.nlink !== 1) throw tampered();
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

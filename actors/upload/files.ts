import { constants } from 'node:fs';
import { link, lstat, mkdir, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { PierError } from '../../bus/errors.js';
import type { ConflictPolicy } from '../../bus/subjects.js';
import { inFolder, openFolderChain } from './walk.js';
import { syncFolder } from '../../lib/state/durable-files.js';

/** Where unfinished uploads keep their bytes: inside `dest`, so publishing is a rename on one filesystem. */
export const PARTS_DIR = '.pier-uploads';

export function partPathFor(destReal: string, id: string): string {
  return join(destReal, PARTS_DIR, `${id}.part`);
}

const tampered = () => new PierError('BAD_REQUEST', "the upload's partial data was moved or replaced: upload the file again");

/**
 * The parts folder lives inside `dest`, which the app can write: it could swap the folder, or a
 * folder above it, for a symlink to make Pier write elsewhere, or put a hard link to a file
 * elsewhere where a part is. So the folder is opened from the user's folder (`top`) one component
 * at a time through folder handles, never through a link (`walk.ts`: `openFolderChain`), and the
 * part is opened *in that handle* (a rename race on the way changes nothing), never through a
 * symlink (O_NOFOLLOW), and never written when the file has another name too (link count above one).
 */
async function withPartsFolder<T>(part: string, top: string, fn: (folder: FileHandle, name: string) => Promise<T>): Promise<T> {
  const folder = await openFolderChain(top, dirname(part), tampered);
  try {
    return await fn(folder, basename(part));
  } finally {
    await folder.close();
  }
}

/** Opens an existing part for writing: never through a symlink, never one that is also another file. */
export async function openPart(part: string, top: string, flags = constants.O_RDWR): Promise<FileHandle> {
  return withPartsFolder(part, top, async (folder, name) => {
    let fd: FileHandle;
    try {
      fd = await open(inFolder(folder, name), flags | constants.O_NOFOLLOW);
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
  });
}

/** A new, empty part: whatever is at its name (a planted link, say) is removed first, then made afresh (O_EXCL). */
export async function createPart(part: string, top: string): Promise<void> {
  // Only Pier looks inside: partial files are not for the app to read.
  const made = await mkdir(dirname(part), { mode: 0o700 }).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
      return false;
    },
  );
  // The parts folder on disk too: a part whose folder vanished at a power cut is an offset lost.
  if (made) await syncFolder(dirname(dirname(part)));
  await withPartsFolder(part, top, async (folder, name) => {
    await unlink(inFolder(folder, name)).catch(() => undefined);
    const fd = await open(inFolder(folder, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'EEXIST' || err.code === 'ELOOP' ? tampered() : err;
    });
    await fd.sync();
    await fd.close();
    await folder.sync();
  });
}

/** The size really on disk (0 when the part is gone or is not a plain file). */
/** Whether the part file is there at all (a missing one and an empty one mean different things to recovery). */
export async function partExists(part: string): Promise<boolean> {
  return (await lstat(part).catch(() => null))?.isFile() ?? false;
}

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

/** The target's folder could not be reached without a link (swapped since the POST). */
const movedErrors = new WeakSet<PierError>();
const moved = () => {
  const err = new PierError('BAD_REQUEST', 'file_relative_path: a folder on the way to the file was moved or replaced since the upload began: upload the file again');
  movedErrors.add(err);
  return err;
};

/** Whether `publish` refused because the target's folder was swapped (the upload cannot land any more). */
export const isFolderMoved = (err: unknown) => err instanceof PierError && movedErrors.has(err);

/**
 * Publishes a complete part at its target, atomically: `replace` renames over any old file;
 * `fail` and `rename` link without overwriting (EEXIST is the check, so no race), then drop the part.
 * Both folders are held as handles reached without links (`openFolderChain`) and the rename or link
 * goes through them, so a folder swapped for a symlink at any moment cannot send the file elsewhere.
 * The folders are fsynced, so the new name survives a crash. Returns the path it landed at.
 */
export async function publish(part: string, target: string, conflict: ConflictPolicy, top: string): Promise<string> {
  return withPartsFolder(part, top, async (parts, partName) => {
    const info = await lstat(inFolder(parts, partName)).catch(() => null);
    if (!info?.isFile() || info.nlink !== 1) throw tampered();
    const folder = await openFolderChain(top, dirname(target), moved);
    try {
      const from = inFolder(parts, partName);
      if (conflict === 'replace') {
        await rename(from, inFolder(folder, basename(target)));
        await folder.sync();
        return target;
      }
      for (let n = 0; n < 10_000; n++) {
        const candidate = n === 0 ? target : numbered(target, n);
        try {
          await link(from, inFolder(folder, basename(candidate)));
          await unlink(from);
          await folder.sync();
          await parts.sync();
          return candidate;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENAMETOOLONG') throw new PierError('BAD_REQUEST', 'file_relative_path: the name is too long to number (conflict=rename)');
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
          if (conflict === 'fail') throw new PierError('CONFLICT', 'the target file exists (conflict=fail)');
        }
      }
      throw new PierError('CONFLICT', 'no free name for the target file');
    } finally {
      await folder.close();
    }
  });
}

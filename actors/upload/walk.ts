import { constants } from 'node:fs';
import { lstat, mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { PierError } from '../../bus/errors.js';
import { syncFolder } from '../../lib/state/durable-files.js';

/**
 * The upload boundary (docs/protocol.md "Upload", amended 2026-11-23): from the user's folder down to
 * `dest`, and from `dest` down to the target, every component is looked at with `lstat` and none
 * may be a symbolic link. `realpath` is never trusted as the boundary: an app whose folder encloses
 * another's (or any process that can write inside the user's folder) could turn a folder on the way
 * into a link to anywhere, and a resolved path would follow it.
 *
 * A refusal says which field was wrong and the rule, never whether or where a host path exists.
 * A walk by path is a check: what writes (parts, publication) goes through `openFolderChain`
 * below, whose handles a later swap cannot move.
 */
export interface WalkOptions {
  /** Missing folders are created one at a time (each then checked like the others), or refused. */
  create: boolean;
  /** The refusal to throw (one answer for a link, a file, a missing folder). */
  refused: () => PierError;
}

/** Walks from `top` (itself checked) down to `path`, which must be `top` or below it. */
export async function walkDown(top: string, path: string, options: WalkOptions): Promise<void> {
  const rel = relative(top, path);
  if (rel.startsWith('..') || rel.startsWith(sep)) throw options.refused();
  let current = top;
  await checkFolder(current, options);
  for (const segment of rel === '' ? [] : rel.split(sep)) {
    current = join(current, segment);
    await checkFolder(current, options);
  }
}

async function checkFolder(path: string, options: WalkOptions): Promise<void> {
  let info = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    // A name the filesystem cannot hold, or a file where a folder should be: the same refusal.
    if (err.code === 'ENAMETOOLONG' || err.code === 'ENOTDIR') throw options.refused();
    throw err;
  });
  if (info === null && options.create) {
    const made = await mkdir(path).then(
      () => true,
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
        return false;
      },
    );
    // A folder made on the way to a target is on disk before the file published in it is answered.
    if (made) await syncFolder(dirname(path));
    info = await lstat(path);
  }
  if (info === null || info.isSymbolicLink() || !info.isDirectory()) throw options.refused();
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * A handle on the folder `path`, reached from `top` one component at a time through the folder
 * handles themselves (`/proc/self/fd/<parent>/<name>`, Linux's way to `openat` from Node), each
 * opened with O_NOFOLLOW | O_DIRECTORY: a link anywhere is refused, and once the handle is held,
 * swapping any name on the way (a `rename(2)` race) changes nothing for what is done through it.
 * `openIn(handle, name)` names an entry of that very folder. The caller closes the handle.
 */
export async function openFolderChain(top: string, path: string, refused: () => PierError): Promise<FileHandle> {
  const rel = relative(top, path);
  if (rel.startsWith('..') || rel.startsWith(sep)) throw refused();
  let handle = await open(top, DIR_FLAGS).catch(() => {
    throw refused();
  });
  for (const segment of rel === '' ? [] : rel.split(sep)) {
    const parent = handle;
    handle = await open(inFolder(parent, segment), DIR_FLAGS).catch(async () => {
      await parent.close();
      throw refused();
    });
    await parent.close();
  }
  return handle;
}

/** The path of `name` inside the folder held by `handle` (the folder itself, however it is named now). */
export const inFolder = (handle: FileHandle, name: string) => `/proc/self/fd/${handle.fd}/${name}`;

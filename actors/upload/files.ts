import { constants } from 'node:fs';
import { link, mkdir, open, rename, stat, truncate, unlink } from 'node:fs/promises';
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

export async function createPart(part: string): Promise<void> {
  // Only Pier looks inside: partial files are not for the app to read.
  await mkdir(dirname(part), { recursive: true, mode: 0o700 });
  const fd = await open(part, 'w', 0o644);
  await fd.sync();
  await fd.close();
  await syncDir(dirname(part));
}

/** The size really on disk (0 when the part is gone). */
export async function partSize(part: string): Promise<number> {
  return (await stat(part).catch(() => ({ size: 0 }))).size;
}

export async function cutBack(part: string, size: number): Promise<void> {
  await truncate(part, size);
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

import { closeSync, constants, existsSync, fsyncSync, linkSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';

// Files Pier creates in its data dir survive a power cut once they are used (docs/operations.md
// "What an acknowledgement means"): a file's bytes are on disk after an fsync of the file, and its
// name after an fsync of the folder holding it. Without the second, a power cut after the first
// start could lose master.key while LMDB kept the data keys it wraps.

/** fsync of a folder: the names created, linked or renamed in it are on disk. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The same without blocking the event loop: for folders made while requests are served. */
export async function syncFolder(dir: string): Promise<void> {
  const fd = await open(dir, constants.O_RDONLY);
  try {
    await fd.sync();
  } finally {
    await fd.close();
  }
}

/** `mkdir -p` whose every new folder is on disk: each one's parent is synced once it is made. */
export function mkdirDurable(dir: string, mode = 0o700): void {
  const path = resolve(dir);
  const missing: string[] = [];
  for (let at = path; !existsSync(at); at = dirname(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  mkdirSync(path, { recursive: true, mode });
  for (const made of missing) fsyncDir(dirname(made));
}

/** A new file holding `text`, written and synced (fails if `path` exists). */
function writeNewSynced(path: string, text: string, mode: number): void {
  const fd = openSync(path, 'wx', mode);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Creates `path` holding `text` unless it exists, durably and whole: written and synced under a
 * draft name, then linked into place (which fails if another process linked its own first: processes
 * starting together on one data dir agree on one value, and none ever reads a half-written file),
 * and the folder synced. Answers whether this call made it.
 */
export function createDurable(path: string, text: string, mode = 0o600): boolean {
  const draft = `${path}.${randomBytes(6).toString('hex')}.draft`;
  writeNewSynced(draft, text, mode);
  let made = true;
  try {
    linkSync(draft, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    made = false;
  } finally {
    unlinkSync(draft);
  }
  // Synced whether or not this call made it: the winner may not have synced the folder yet.
  fsyncDir(dirname(path));
  return made;
}

/** Replaces `path` with `text` atomically and durably: a reader sees the old file or the new, never half. */
export function replaceDurable(path: string, text: string, mode = 0o600): void {
  const draft = `${path}.${randomBytes(6).toString('hex')}.draft`;
  writeNewSynced(draft, text, mode);
  renameSync(draft, path);
  fsyncDir(dirname(path));
}

/** An LMDB environment's folder and files made by its first open are on disk (lmdb-js syncs data, not names). */
export function settleLmdbFolder(path: string): void {
  fsyncDir(path);
  fsyncDir(dirname(resolve(path)));
}

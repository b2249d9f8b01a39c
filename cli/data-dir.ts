import { chmod, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Makes Pier's data dir private: the dir 0700, every file Pier keeps in it 0600 and every folder
 * 0700 (LMDB stores, the master key, the admin token), whatever umask or an older version left.
 * Runs at start, after the stores are open (LMDB creates its files with the process umask).
 * `skip` lists absolute paths that are not Pier's own (the upload root: users' files, whose modes
 * are the operator's and the apps' business).
 */
export async function makePrivate(dataDir: string, skip: readonly string[] = []): Promise<void> {
  await chmod(dataDir, 0o700);
  await walk(dataDir, new Set(skip), 0);
}

async function walk(dir: string, skip: Set<string>, depth: number): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (skip.has(path)) continue;
    if (entry.isDirectory()) {
      await chmod(path, 0o700);
      // Pier's own stores are one level deep; nothing it keeps goes deeper than a few.
      if (depth < 4) await walk(path, skip, depth + 1);
    } else if (entry.isFile()) {
      await chmod(path, 0o600);
    }
    // Symlinks and others are left alone: chmod would follow a link out of the data dir.
  }
}

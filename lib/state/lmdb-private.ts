import { chmodSync } from 'node:fs';
import { mkdirDurable, settleLmdbFolder } from './durable-files.js';
import { open, type RootDatabase, type RootDatabaseOptions } from 'lmdb';

/** Modes of what Pier keeps in its data dir (docs/security.md "At rest"). */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/**
 * Opens an LMDB environment private from its first byte: its folder 0700 and its files (data and
 * lock) created 0600, whatever the umask (lmdb-js would make them 0664 and the folder 0755, less the
 * umask). The sweep at start (cli/data-dir.ts) fixes the modes of stores opened before it; a store
 * opened after it (the edge's gateway history) would otherwise stay readable until the next start.
 * `permissionsMode` is lmdb-js's option for the mode it passes to mdb_env_open (its types omit it).
 */
export function openPrivate(path: string, options: RootDatabaseOptions): RootDatabase {
  mkdirDurable(path, PRIVATE_DIR_MODE);
  // An existing folder keeps its mode under mkdir, and a new one gets the umask's: said once here.
  chmodSync(path, PRIVATE_DIR_MODE);
  const root = open({ ...options, path, permissionsMode: PRIVATE_FILE_MODE } as RootDatabaseOptions & { path: string; permissionsMode: number });
  settleLmdbFolder(path);
  return root;
}

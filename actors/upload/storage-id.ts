import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createDurable } from '../../lib/state/durable-files.js';
import { join } from 'node:path';

/** Beside the users' folders, never inside one (user names cannot start with a dot). */
const FILE = '.pier-storage';

/**
 * The identity of an upload root: made once, kept in the root itself, so every replica that sees
 * the same root (one host, or shared storage on several) has the same id, and no other does.
 * Upload records on JetStream name it: a replica serves only the uploads whose bytes it can reach.
 */
export async function storageIdOf(root: string): Promise<string> {
  const path = join(root, FILE);
  // Replicas starting at once: the first id linked into place wins and every one reads it. Written
  // whole and synced under a name of its own first, then linked (which fails if the id exists), the
  // root synced: never read half-written, never lost to a power cut once records name it.
  createDurable(path, `${randomBytes(12).toString('base64url')}\n`, 0o600);
  const id = (await readFile(path, 'utf8')).trim();
  if (!/^[A-Za-z0-9_-]{8,64}$/.test(id)) throw new Error(`${path}: not a storage id; remove the file to make a new one (its unfinished uploads are then forgotten)`);
  return id;
}

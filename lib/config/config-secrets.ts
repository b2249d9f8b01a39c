import { accessSync, constants, readFileSync } from 'node:fs';
import { createDurable, mkdirDurable } from '../state/durable-files.js';
import { ConfigError } from './config-error.js';
import { ENV } from './config-env.js';

// The data dir and the secrets kept in it (the admin token, the master key): read from the
// environment when given, else made once in the data dir and shared by every process using it.

/** Creates the data dir (0700) if needed and checks it can be read and written, before anything is stored there. */
export function ensureWritableDir(dir: string): void {
  try {
    mkdirDurable(dir, 0o700);
    accessSync(dir, constants.W_OK | constants.R_OK);
  } catch (err) {
    throw new ConfigError(`${ENV.dataDir}: ${dir} is not a writable directory (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/**
 * A secret given in the environment, or else read from (or created in) a 0600 file in the data
 * dir. Creation uses O_EXCL, so processes starting together on one data dir agree on one value.
 */
export function secretFile(path: string, make: () => string): string {
  // Written whole and synced, then linked into place and its folder synced (lib/state/durable-files.ts):
  // a power cut after the first start never loses it, nor leaves it empty.
  try {
    createDurable(path, make(), 0o600);
  } catch (err) {
    throw new ConfigError(`cannot create ${path}: ${(err as Error).message}`);
  }
  const value = readFileSync(path, 'utf8').trim();
  if (value === '') throw new ConfigError(`${path} is empty: delete it to have a new one generated`);
  return value;
}

/** A master key as 64 hex digits or base64 of 32 bytes; `source` names where it came from in the error. */
export function parseMasterKey(text: string, source: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new ConfigError(`${source}: must be 32 bytes, as 64 hex digits or base64`);
  return key;
}

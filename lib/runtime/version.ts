import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Pier's version, from its package.json (read once; "unknown" when the file is not where it should be). */
let cached: string | undefined;
export function pierVersion(): string {
  if (cached === undefined) {
    try {
      cached = String((JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as { version?: unknown }).version ?? 'unknown');
    } catch {
      cached = 'unknown';
    }
  }
  return cached;
}

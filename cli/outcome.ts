import { PierError } from '../bus/errors.js';
import { ConfigError } from '../lib/config/config.js';
import { CliError } from './admin-client.js';

/**
 * The CLI's exit codes, by class, so scripts can tell what happened without reading the words
 * (README "The pier CLI"): 0 done; 1 refused or failed (a bad request, anything else); 2 usage
 * (an unknown command, a missing flag); 3 unreachable (no admin API, or a role with no replica:
 * 503); 4 auth (no or a wrong admin token); 5 not found; 6 conflict (exists already, refused as
 * such).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3, auth: 4, notFound: 5, conflict: 6 } as const;

const CODES: Record<number, string> = { 400: 'BAD_REQUEST', 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 404: 'NOT_FOUND', 409: 'CONFLICT', 413: 'TOO_LARGE', 429: 'RATE_LIMITED', 500: 'INTERNAL', 502: 'BAD_GATEWAY', 503: 'UNAVAILABLE', 504: 'TIMEOUT' };

/** What a failure says: its HTTP status (0 when none), a code word, the message, the exit code. */
export function describeFailure(err: unknown): { status: number; code: string; message: string; exit: number } {
  if (err instanceof CliError) {
    const status = err.status ?? 0;
    const code = err.kind === 'usage' ? 'USAGE' : err.kind === 'unreachable' ? 'UNREACHABLE' : err.kind === 'auth' ? 'UNAUTHORIZED' : (CODES[status] ?? 'FAILED');
    return { status, code, message: err.message, exit: exitFor(status, err.kind) };
  }
  if (err instanceof ConfigError) return { status: 0, code: 'CONFIG', message: err.message, exit: EXIT.failed };
  if (err instanceof PierError) return { status: 0, code: err.code, message: err.message, exit: EXIT.failed };
  const code = (err as { code?: string }).code;
  return { status: 0, code: 'FAILED', message: `${code ? `${code}: ` : ''}${(err as Error).message}`, exit: EXIT.failed };
}

function exitFor(status: number, kind: CliError['kind']): number {
  if (kind === 'usage') return EXIT.usage;
  if (kind === 'unreachable' || status === 503 || status === 504) return EXIT.unreachable;
  if (kind === 'auth' || status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 409) return EXIT.conflict;
  return EXIT.failed;
}

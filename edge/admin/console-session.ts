import { randomBytes } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import { safeEqual } from '../../lib/crypto/tokens.js';
import type { HttpRequestData, RequestHead } from '../http/http.js';
import { sameOrigin } from '../identity/host.js';

/**
 * The operator console's sign-in (docs/operations.md "Console"): the admin token, typed once into a
 * form, becomes a session cookie (`HttpOnly`, `SameSite=Strict`, expiring) so the token itself is
 * never kept by the page; every state-changing request of a session also carries its CSRF token.
 * Sessions live in the admin process's memory: a restart signs everyone out.
 */
export const SESSION_COOKIE = 'pier_console';
export const CSRF_HEADER = 'x-csrf-token';

interface Session {
  csrf: string;
  expiresAt: number;
}

export interface ConsoleSessionOptions {
  ttlMs: number;
  /** Sessions kept at most; the oldest goes first. */
  max: number;
  now: () => number;
}

/** The cookie header's value for `name` (the last one wins, as browsers send the most specific last). */
export function cookieOf(header: string | undefined, name: string): string | undefined {
  let found: string | undefined;
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) found = part.slice(eq + 1).trim();
  }
  return found;
}

const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export class ConsoleSessions {
  private readonly sessions = new Map<string, Session>();
  /** Failed sign-ins in the current minute: a bound on guessing, whoever guesses. */
  private failures = { minute: 0, count: 0 };

  constructor(private readonly o: ConsoleSessionOptions) {}

  /**
   * Opens a session for whoever knows the admin token, whatever others tried before: the right
   * token is compared first (in constant time, no slow hash), so failures from elsewhere (they all
   * come from 127.0.0.1) never lock the operator out. A wrong one is 401, and 429 past 20 failures
   * in a minute (docs/security.md: what bounds guessing is the token's strength).
   */
  signIn(token: string, adminToken: string): { id: string; csrf: string; expiresAt: number } {
    const now = this.o.now();
    const minute = Math.floor(now / 60_000);
    if (this.failures.minute !== minute) this.failures = { minute, count: 0 };
    if (token === '' || !safeEqual(token, adminToken)) {
      this.failures.count++;
      if (this.failures.count > 20) throw new PierError('RATE_LIMITED', 'too many failed sign-ins: wait a minute');
      throw new PierError('UNAUTHORIZED', 'token: not the admin token');
    }
    this.sweep(now);
    while (this.sessions.size >= this.o.max) this.sessions.delete(this.sessions.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    const session = { csrf: randomBytes(32).toString('base64url'), expiresAt: now + this.o.ttlMs };
    this.sessions.set(id, session);
    return { id, ...session };
  }

  /** The request's live session, or undefined (no cookie, unknown, expired). */
  sessionOf(req: RequestHead): (Session & { id: string }) | undefined {
    const id = cookieOf(req.headers.cookie, SESSION_COOKIE);
    if (!id) return undefined;
    const s = this.sessions.get(id);
    if (!s) return undefined;
    if (s.expiresAt <= this.o.now()) {
      this.sessions.delete(id);
      return undefined;
    }
    return { id, ...s };
  }

  /**
   * Whether a session may make this request: a live session, and for a change (POST, PUT, PATCH,
   * DELETE) its CSRF token in `X-CSRF-Token` and, when the browser says where it comes from, an
   * Origin that is the admin listener's own. Throws 401 / 403 naming what is missing.
   */
  authorize(req: RequestHead): void {
    const s = this.sessionOf(req);
    if (!s) {
      // Without a console cookie this is an admin API call without its token: said as always.
      if (cookieOf(req.headers.cookie, SESSION_COOKIE) === undefined) throw new PierError('UNAUTHORIZED', 'admin token missing or wrong');
      throw new PierError('UNAUTHORIZED', 'the console session expired or is unknown: sign in again');
    }
    if (!WRITES.has(req.method.toUpperCase())) return;
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== 'null' && !sameOrigin(origin, req.headers.host ?? '')) throw new PierError('FORBIDDEN', 'Origin: a console change must come from the console itself');
    if (origin === 'null') throw new PierError('FORBIDDEN', 'Origin: a console change must come from the console itself');
    const csrf = req.headers[CSRF_HEADER] ?? '';
    if (csrf === '' || !safeEqual(csrf, s.csrf)) throw new PierError('FORBIDDEN', 'X-CSRF-Token: missing or wrong for this session');
  }

  signOut(req: HttpRequestData): void {
    const s = this.sessionOf(req);
    if (s) this.sessions.delete(s.id);
  }

  get size(): number {
    return this.sessions.size;
  }

  private sweep(now: number): void {
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }
}

/**
 * Whether a sign-in may be tried: an `Origin`, when sent, must be the admin listener's own. Without
 * one the body must be declared `application/json`: a web page can post a form or `text/plain`
 * across sites without asking, but a JSON body from another site needs a CORS preflight, which
 * the admin listener never grants.
 */
export function signInOriginOk(req: HttpRequestData): boolean {
  const origin = req.headers.origin;
  if (origin !== undefined) return origin !== 'null' && sameOrigin(origin, req.headers.host ?? '');
  return (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() === 'application/json';
}

/** The Set-Cookie value of a session (Secure when the listener is TLS); `maxAgeS` 0 clears it. */
export function sessionCookie(id: string, maxAgeS: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}${secure ? '; Secure' : ''}`;
}

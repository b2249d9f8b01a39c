import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { APP_NAME_RULE, USER_NAME, USER_NAME_RULE } from '../../bus/subjects.js';
import { safeEqual } from '../../lib/crypto/tokens.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import type { Peers } from '../../lib/runtime/peers.js';
import type { Logger } from '../../lib/runtime/log.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, RequestHead } from '../http/http.js';
import type { AdminApi, AdminRouteName, AnswerOf } from './api.js';
import type { ConsoleSessions } from './console-session.js';

// How the admin listener's routes answer (docs/protocol.md "Admin API"): the operator checked
// first, then the declared answer of edge/admin/api.ts in the envelope, or a reply of its own
// (RawReply). Every admin file (the admin API's groups, the live routes, the console) builds its
// answers from here, and none imports another's.

export interface AdminDeps {
  bus: Bus;
  cache: RegistryCache;
  adminToken: string;
  /** The `OS_SYSTEM_SERVER` value given to installed apps: `host:port`, no scheme. */
  systemServer: () => string;
  roles: string[];
  /** Live processes by role, from their heartbeats. */
  peers: Pick<Peers, 'alive' | 'signedBy' | 'mismatched'>;
  /** Where the operator's changes are logged (admin action lines). */
  log?: Pick<Logger, 'info'>;
  /** The console's sessions (made in edge/routes.ts): a signed-in console may call the admin API too. */
  sessions?: ConsoleSessions;
}

/**
 * Admin calls carry `Authorization: Bearer <admin token>`, compared in constant time; without
 * the header, a console session (its cookie, and for a change its CSRF token) stands for it.
 */
export function requireAdmin(deps: Pick<AdminDeps, 'adminToken' | 'sessions'>, req: RequestHead): void {
  const header = req.headers.authorization ?? '';
  if (header === '' && deps.sessions) return deps.sessions.authorize(req);
  const token = header.startsWith('Bearer ') ? header.slice(7) : '';
  if (token === '' || !safeEqual(token, deps.adminToken)) throw new PierError('UNAUTHORIZED', 'admin token missing or wrong');
}

/** A user or app name from the route's path, checked: 400 naming `what` and its rule. */
export function pathName(req: HttpRequestData, key: string, pattern: RegExp, what: string): string {
  const v = req.params[key];
  if (!pattern.test(v)) throw new PierError('BAD_REQUEST', `${what}: ${pattern === USER_NAME ? USER_NAME_RULE : APP_NAME_RULE}`);
  return v;
}

/** A reply that is not the envelope around a declared answer (an NDJSON stream, an envelope with flags beside `data`). */
export class RawReply {
  constructor(readonly reply: HttpReply) {}
}

/**
 * The success envelope with fields beside `data` (`partial`, `truncated`, `searched`:
 * docs/protocol.md "Admin API"), in that order after `code`, `message` and `data`.
 */
export function besideData(data: unknown, beside: Record<string, unknown>): RawReply {
  return new RawReply({ status: 200, json: { code: 0, message: 'success', data, ...beside } });
}

/** What a route's handler answers: its declared type (edge/admin/api.ts), or a RawReply. */
export type AnswerHandler<R> = (req: HttpRequestData) => Promise<AnswerOf<R> | RawReply>;
export type AnswerHandlers<K extends AdminRouteName = AdminRouteName> = { [N in K]: AnswerHandler<AdminApi[N]> };

/** A typed handler as a route's: the admin token (or console session) checked first, the answer in the envelope. */
export function enveloped<R>(deps: Pick<AdminDeps, 'adminToken' | 'sessions'>, handler: AnswerHandler<R>): (req: HttpRequestData) => Promise<HttpReply> {
  return async (req) => {
    requireAdmin(deps, req);
    const answer = await handler(req);
    return answer instanceof RawReply ? answer.reply : ok(answer);
  };
}

/** The routes' handlers by name, each checking the admin token and answering the envelope (what edge/routes.ts mounts). */
export function envelopedAll<K extends AdminRouteName>(deps: Pick<AdminDeps, 'adminToken' | 'sessions'>, answers: AnswerHandlers<K>): Record<K, (req: HttpRequestData) => Promise<HttpReply>> {
  const out = {} as Record<K, (req: HttpRequestData) => Promise<HttpReply>>;
  for (const name of Object.keys(answers) as K[]) out[name] = enveloped(deps, answers[name] as AnswerHandler<unknown>);
  return out;
}

import { PierError } from '../../bus/errors.js';
import type { ConsoleSession } from './api.js';
import { loadConsoleFiles } from './console-assets.js';
import { sessionCookie, signInOriginOk, type ConsoleSessions } from './console-session.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, Route } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';

/**
 * The operator console (docs/operations.md "Console") on the admin listener: its page and files under
 * `/console/`, its sign-in (`/console/session`). The sampler behind the figures' history is
 * history-sampler.ts (live-api.ts serves it). Everything else it shows comes from the admin API, as
 * the CLI's does.
 */
export interface ConsoleOptions {
  sessionMs: number;
  sampleMs: number;
  now: () => number;
}

/**
 * The console's routes over its sessions, which edge/routes.ts makes (they authorize the admin API
 * too: answers.ts `requireAdmin`) and passes here.
 */
export function consoleRoutes(deps: { adminToken: string }, o: Pick<ConsoleOptions, 'sessionMs'>, sessions: ConsoleSessions): Route[] {
  const files = loadConsoleFiles();
  const page = (): HttpReply => ({ status: 200, body: files.index, headers: { ...files.headers, 'content-type': 'text/html; charset=utf-8' } });

  const routes: Route[] = [
    { method: 'get', path: '/console', handler: () => ({ status: 308, headers: { location: '/console/' } }) },
    { method: 'get', path: '/console/', handler: page },
    {
      method: 'get',
      path: '/console/assets/:name',
      handler: (req) => {
        const asset = files.assets.get(req.params.name ?? '');
        if (!asset) throw new PierError('NOT_FOUND', 'no such console file');
        return { status: 200, body: asset.body, headers: { ...files.headers, 'content-type': asset.type } };
      },
    },
    {
      method: 'post',
      path: '/console/session',
      bodyLimit: 4096,
      handler: (req) => {
        if (!signInOriginOk(req)) throw new PierError('FORBIDDEN', 'Origin: a sign-in must come from the console itself');
        const token = tokenOf(req);
        const opened = sessions.signIn(token, deps.adminToken);
        return { ...ok(sessionAnswer(opened)), headers: { 'set-cookie': sessionCookie(opened.id, Math.floor(o.sessionMs / 1000), false), 'cache-control': 'no-store' } };
      },
    },
    {
      method: 'get',
      path: '/console/session',
      handler: (req) => {
        const s = sessions.sessionOf(req);
        if (!s) throw new PierError('UNAUTHORIZED', 'no console session: sign in');
        return { ...ok(sessionAnswer(s)), headers: { 'cache-control': 'no-store' } };
      },
    },
    {
      method: 'del',
      path: '/console/session',
      handler: (req) => {
        sessions.authorize(req);
        sessions.signOut(req);
        return { ...ok(), headers: { 'set-cookie': sessionCookie('', 0, false) } };
      },
    },
  ];
  return routes;
}

/** The session as the console reads it (edge/admin/api.ts ConsoleSession), with the 0.1 name for one release. */
function sessionAnswer(s: { csrf: string; expiresAt: number }): ConsoleSession {
  const expiresAt = new Date(s.expiresAt).toISOString();
  return { csrf: s.csrf, expiresAt, expires_at: expiresAt };
}

/** The sign-in form's token: JSON `{token}` or a urlencoded `token=` (a form posted without script). */
function tokenOf(req: HttpRequestData): string {
  const type = req.headers['content-type'] ?? '';
  if (type.startsWith('application/x-www-form-urlencoded')) return new URLSearchParams(req.body.toString('utf8')).get('token') ?? '';
  const body = parseJsonBody(req);
  if (typeof body.token !== 'string') throw new PierError('BAD_REQUEST', 'token: must be a string');
  return body.token;
}

import { PierError } from '../../bus/errors.js';
import { describeProcesses } from '../../lib/runtime/presence.js';
import type { AdminDeps } from './admin-api.js';
import type { ConsoleSession } from './api.js';
import type { SampledHistory } from './live-api.js';
import { loadConsoleFiles } from './console-assets.js';
import { ConsoleSessions, sessionCookie, signInOriginOk } from './console-session.js';
import type { HttpReply, HttpRequestData, Route } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import { MetricsHistory, type MetricJson } from './metrics-history.js';

/**
 * The operator console (docs/operations.md "Console") on the admin listener: its page and files under
 * `/console/`, its sign-in (`/console/session`), and the sampler behind the figures' history
 * (live-api.ts serves it). Everything else it shows comes from the admin API, as the CLI's does.
 */
export interface ConsoleOptions {
  sessionMs: number;
  sampleMs: number;
  now: () => number;
}

/** The console's state and routes; `sessions` also authorizes the admin API (admin-api.ts `requireAdmin`). */
export function consoleRoutes(deps: AdminDeps, o: ConsoleOptions): { routes: Route[]; sessions: ConsoleSessions; history: SampledHistory } {
  const files = loadConsoleFiles();
  const sessions = new ConsoleSessions({ ttlMs: o.sessionMs, max: 100, now: o.now });
  deps.sessions = sessions;
  const history = new MetricsHistory(180);
  // A table built only to be read (the reference's test) has no sampling period: nothing to sample.
  if (o.sampleMs > 0) historySampler(deps, history, o.sampleMs).start();
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
        return {
          status: 200,
          json: { code: 0, message: 'success', data: sessionAnswer(opened) },
          headers: { 'set-cookie': sessionCookie(opened.id, Math.floor(o.sessionMs / 1000), false), 'cache-control': 'no-store' },
        };
      },
    },
    {
      method: 'get',
      path: '/console/session',
      handler: (req) => {
        const s = sessions.sessionOf(req);
        if (!s) throw new PierError('UNAUTHORIZED', 'no console session: sign in');
        return { status: 200, json: { code: 0, message: 'success', data: sessionAnswer(s) }, headers: { 'cache-control': 'no-store' } };
      },
    },
    {
      method: 'del',
      path: '/console/session',
      handler: (req) => {
        sessions.authorize(req);
        sessions.signOut(req);
        return { status: 200, json: { code: 0, message: 'success' }, headers: { 'set-cookie': sessionCookie('', 0, false) } };
      },
    },
  ];
  return { routes, sessions, history: { everyMs: o.sampleMs, samples: () => history.all() } };
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

/**
 * Samples every process's figures every `everyMs` from the admin process's start, so the charts
 * hold the last minutes at sign-in (the history keeps a bounded number of samples; one sample is
 * one report of each process, as `pier status` asks).
 */
function historySampler(deps: AdminDeps, history: MetricsHistory, everyMs: number) {
  let timer: NodeJS.Timeout | null = null;
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const reports = await describeProcesses(deps.bus, 300, deps.peers as Parameters<typeof describeProcesses>[2]);
      history.add(Date.now(), reports.map((r) => r.metrics as unknown as MetricJson[]));
    } catch {
      // A missed sample is a gap in the chart, nothing more.
    } finally {
      busy = false;
    }
  };
  return {
    start() {
      if (timer) return;
      timer = setInterval(() => void tick(), everyMs);
      timer.unref();
      void tick();
    },
  };
}

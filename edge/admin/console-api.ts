import { at } from '../../bus/exchange.js';
import { ask, gather } from '../../bus/verbs.js';
import { PierError } from '../../bus/errors.js';
import { edgeOfConn } from '../../bus/ids.js';
import { APP_NAME, gatewayChannels, gatewaySubjects, registry, upload, USER_NAME, type AppView } from '../../bus/subjects.js';
import { describeProcesses } from '../../lib/runtime/presence.js';
import { assertValid, compile } from '../../bus/validation.js';
import type { AdminDeps } from './admin-api.js';
import { requireAdmin } from './admin-api.js';
import { loadConsoleFiles } from './console-assets.js';
import { ConsoleSessions, sessionCookie, signInOriginOk } from './console-session.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, Route } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import { MetricsHistory, type MetricJson } from './metrics-history.js';

/**
 * The operator console (docs/operations.md "Console") on the admin listener: its page and files under
 * `/console/`, its sign-in (`/console/session`), and the admin endpoints only it needed so far —
 * connections across edges, uploads in progress, a short history of the cluster's figures — each
 * with its CLI command, so the CLI can do whatever the console does.
 */
export interface ConsoleOptions {
  sessionMs: number;
  sampleMs: number;
  now: () => number;
}

const closeSchema = compile({
  $$strict: true,
  user: { type: 'string', pattern: USER_NAME },
  app: { type: 'string', pattern: APP_NAME },
  conns: { type: 'array', min: 1, max: 1000, items: { type: 'string', max: 128 } },
});

/** The console's state and routes; `sessions` also authorizes the admin API (admin-api.ts `requireAdmin`). */
export function consoleRoutes(deps: AdminDeps, o: ConsoleOptions): { routes: Route[]; sessions: ConsoleSessions } {
  const files = loadConsoleFiles();
  const sessions = new ConsoleSessions({ ttlMs: o.sessionMs, max: 100, now: o.now });
  deps.sessions = sessions;
  const history = new MetricsHistory(180);
  const sampler = historySampler(deps, history, sessions, o.sampleMs);
  const guarded = (fn: (req: HttpRequestData) => Promise<HttpReply>) => (req: HttpRequestData) => {
    requireAdmin(deps, req);
    return fn(req);
  };
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
        sampler.wake();
        return {
          status: 200,
          json: { code: 0, message: 'success', data: { csrf: opened.csrf, expires_at: new Date(opened.expiresAt).toISOString() } },
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
        return { status: 200, json: { code: 0, message: 'success', data: { csrf: s.csrf, expires_at: new Date(s.expiresAt).toISOString() } }, headers: { 'cache-control': 'no-store' } };
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
    { method: 'get', path: '/admin/v1/metrics/history', handler: guarded(async () => ok({ every_ms: o.sampleMs, samples: history.all() })) },
    { method: 'get', path: '/admin/v1/connections', handler: guarded((req) => listConnections(deps, req)) },
    { method: 'post', path: '/admin/v1/connections/close', bodyLimit: 128 * 1024, handler: guarded((req) => closeConnections(deps, req)) },
    {
      method: 'get',
      path: '/admin/v1/uploads',
      handler: guarded(async (req) => {
        const limitText = req.query.get('limit') ?? '200';
        if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000) throw new PierError('BAD_REQUEST', 'limit: must be an integer from 1 to 1000');
        return ok(await ask(deps.bus, upload.list, { limit: Number(limitText) }));
      }),
    },
  ];
  return { routes, sessions };
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
 * Samples every process's figures every `everyMs` while someone is signed in (no session, no
 * traffic: the timer stops, and starts again at the next sign-in).
 */
function historySampler(deps: AdminDeps, history: MetricsHistory, sessions: ConsoleSessions, everyMs: number) {
  let timer: NodeJS.Timeout | null = null;
  let busy = false;
  const tick = async () => {
    if (sessions.size === 0) {
      clearInterval(timer!);
      timer = null;
      return;
    }
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
    wake() {
      if (timer) return;
      timer = setInterval(() => void tick(), everyMs);
      timer.unref();
      void tick();
    },
  };
}

const MAX_APPS = 200;

/** `GET /admin/v1/connections[?user=U[&app=A]]`: every edge's connections, per app; `partial` when an edge did not answer. */
async function listConnections(deps: AdminDeps, req: HttpRequestData): Promise<HttpReply> {
  const user = req.query.get('user') ?? undefined;
  const appName = req.query.get('app') ?? undefined;
  if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: must match ${USER_NAME}`);
  if (appName !== undefined && (user === undefined || !APP_NAME.test(appName))) throw new PierError('BAD_REQUEST', `app: needs user, and must match ${APP_NAME}`);
  const summaries = await ask(deps.bus, registry.appList, user === undefined ? {} : { user });
  const apps = summaries
    .filter((s) => appName === undefined || s.app === appName)
    .map((s) => deps.cache.app(s.user, s.app))
    .filter((a): a is AppView => a !== undefined && a.websocket !== null);
  const alive = deps.peers.alive('edge');
  const edges = alive.length;
  // A connection id names its edge by bus id; the console names processes by instance id.
  const processOf = new Map(alive.map((p) => [p.busId, p.id]));
  let partial = false;
  const data = await Promise.all(
    apps.slice(0, MAX_APPS).map(async (a) => {
      const replies = await gather(deps.bus, at(gatewayChannels.list, gatewaySubjects.list), { appId: a.id }, { timeoutMs: 1_000, stallMs: 1_000, expected: edges });
      if (replies.length < edges) partial = true;
      const conns = replies.flatMap((r) => r.conns).map((c) => {
        const edge = edgeOfConn(c.id) ?? null;
        return { id: c.id, user: c.user, userAgent: c.userAgent, edge, process: edge === null ? null : (processOf.get(edge) ?? null) };
      });
      return { user: a.user, app: a.name, conns };
    }),
  );
  const json: Record<string, unknown> = { code: 0, message: 'success', data };
  if (partial) json.partial = true;
  if (apps.length > MAX_APPS) json.truncated = true;
  return { status: 200, json };
}

/** `POST /admin/v1/connections/close {user, app, conns}`: each connection closed by its edge (4001), the count answered. */
async function closeConnections(deps: AdminDeps, req: HttpRequestData): Promise<HttpReply> {
  const body = parseJsonBody(req);
  assertValid(closeSchema, body);
  const appId = `${body.user as string}/${body.app as string}`;
  let closed = 0;
  for (const id of new Set(body.conns as string[])) {
    const edge = edgeOfConn(id);
    if (!edge) throw new PierError('BAD_REQUEST', `conns: "${id.slice(0, 64)}" is not a connection id`);
    try {
      closed += (await ask(deps.bus, at(gatewayChannels.command, gatewaySubjects.edge(edge)), { op: 'close', appId, connIds: [id] })).count;
    } catch {
      // Its edge is gone: so is the connection.
    }
  }
  return ok({ closed });
}

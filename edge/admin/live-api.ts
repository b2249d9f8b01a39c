import { at } from '../../bus/exchange.js';
import { ask, gather } from '../../bus/verbs.js';
import { PierError } from '../../bus/errors.js';
import { edgeOfConn } from '../../bus/ids.js';
import { APP_NAME_RULE, USER_NAME_RULE, APP_NAME, gatewayChannels, gatewaySubjects, registry, upload, USER_NAME, type AppView } from '../../bus/subjects.js';
import { assertValid, compile } from '../../bus/validation.js';
import type { HttpRequestData } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import { besideData, type AdminDeps, type AnswerHandlers, type RawReply } from './answers.js';
import type { AppConnections, MetricsHistoryAnswer } from './api.js';
import type { SampledHistory } from './history-sampler.js';

/**
 * What is live across the cluster (docs/protocol.md "Admin API"): connections on every edge, uploads
 * in progress, the console's short history of figures. Each has its CLI command, so the CLI can do
 * whatever the console does.
 */
export type LiveRouteName = 'connections' | 'connectionsClose' | 'uploads' | 'metricsHistory';

const closeSchema = compile({
  $$strict: true,
  user: { type: 'string', pattern: USER_NAME },
  app: { type: 'string', pattern: APP_NAME },
  conns: { type: 'array', min: 1, max: 1000, items: { type: 'string', max: 128 } },
});

const MAX_APPS = 200;

export function liveAnswers(deps: AdminDeps, history: SampledHistory): AnswerHandlers<LiveRouteName> {
  return {
    connections: (req) => listConnections(deps, req),
    connectionsClose: (req) => closeConnections(deps, req),
    uploads: async (req) => {
      const limitText = req.query.get('limit') ?? '200';
      if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000) throw new PierError('BAD_REQUEST', 'limit: must be an integer from 1 to 1000');
      const { uploads, truncated } = await ask(deps.bus, upload.list, { limit: Number(limitText) });
      return { uploads: uploads.map((u) => ({ id: u.id, user: u.user, app: u.app, path: u.path, offset: u.offset, size: u.size, protocol: u.protocol, writing: u.writing, updatedAt: u.updatedAt })), truncated };
    },
    metricsHistory: async () => historyAnswer(history),
  };
}

/** The samples in the wire's names, and for one release their 0.1 names too (CHANGELOG.md). */
export function historyAnswer(history: SampledHistory): MetricsHistoryAnswer {
  return {
    everyMs: history.everyMs,
    every_ms: history.everyMs,
    samples: history.samples().map((s) => ({
      at: s.at,
      httpRequestsPerSecond: s.http_requests_per_s,
      httpP99Ms: s.http_p99_ms,
      providerCallsPerSecond: s.provider_calls_per_s,
      vaultOpsPerSecond: s.vault_ops_per_s,
      wsMessagesPerSecond: s.ws_messages_per_s,
      callbackRetriesPerSecond: s.callback_retries_per_s,
      busRefusalsPerSecond: s.bus_refusals_per_s,
      wsConnections: s.ws_connections,
      uploadsActive: s.uploads_active,
      routes: s.routes,
      http_requests_per_s: s.http_requests_per_s,
      http_p99_ms: s.http_p99_ms,
      provider_calls_per_s: s.provider_calls_per_s,
      vault_ops_per_s: s.vault_ops_per_s,
      ws_messages_per_s: s.ws_messages_per_s,
      callback_retries_per_s: s.callback_retries_per_s,
      bus_refusals_per_s: s.bus_refusals_per_s,
      ws_connections: s.ws_connections,
      uploads_active: s.uploads_active,
    })),
  };
}

/** `GET /admin/v1/connections[?user=U[&app=A]]`: every edge's connections, per app; `partial` when an edge did not answer. */
async function listConnections(deps: AdminDeps, req: HttpRequestData): Promise<RawReply> {
  const user = req.query.get('user') ?? undefined;
  const appName = req.query.get('app') ?? undefined;
  if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: ${USER_NAME_RULE}`);
  if (appName !== undefined && (user === undefined || !APP_NAME.test(appName))) throw new PierError('BAD_REQUEST', `app: needs user, and ${APP_NAME_RULE}`);
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
  const data: AppConnections[] = await Promise.all(
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
  // `partial` and `truncated` sit beside `data` in the envelope (docs/protocol.md "Admin API").
  return besideData(data, { ...(partial ? { partial: true } : {}), ...(apps.length > MAX_APPS ? { truncated: true } : {}) });
}

/** `POST /admin/v1/connections/close {user, app, conns}`: each connection closed by its edge (4001), the count answered. */
async function closeConnections(deps: AdminDeps, req: HttpRequestData): Promise<{ closed: number }> {
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
  return { closed };
}

import { at } from '../../bus/exchange.js';
import { ask, gather } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { edgeOfConn, parseAppId } from '../../bus/ids.js';
import { USER_NAME_RULE, gatewayChannels, gatewaySubjects, registry, USER_NAME, type AppView, type ConnCommand } from '../../bus/subjects.js';
import type { Peers } from '../../lib/runtime/peers.js';
import { FailureLimiter } from '../../lib/policy/rate-limit.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { sha256Hex } from '../../lib/crypto/tokens.js';
import type { PassedGates } from '../identity/call-gate.js';
import { assertValid, compile } from '../../bus/validation.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, RequestHead } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import type { HistoryClient } from './history/history-client.js';

export interface LocalDeps {
  bus: Bus;
  cache: RegistryCache;
  peers: Peers;
  /** Sidecar mode: the one app this listener serves, without headers. */
  sidecarApp: { user: string; app: string } | null;
  now: () => number;
  /** App credentials the registry confirmed lately (`caller`). */
  verified: PassedGates;
  /** Where what apps send to users is kept (docs/gateway.md "History and recovery"); absent or null: nothing is. */
  history?: HistoryClient | null;
}

const sendSchema = compile({
  $$strict: false,
  payload: { type: 'any' },
  conn_id: { type: 'string', optional: true, max: 64 },
  users: { type: 'array', optional: true, max: 10_000, items: { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } } },
});
const closeSchema = compile({
  $$strict: false,
  conns: { type: 'array', optional: true, max: 10_000, items: { type: 'string', max: 64 } },
  users: { type: 'array', optional: true, max: 10_000, items: { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } } },
});

/**
 * The app side of the gateway (port 40010). Whichever edge gets the call, it reaches the edges
 * holding the connections over the bus: by connection through the holder's own subject, by user
 * through per-user subjects only holders subscribe to.
 */
export function localApi(deps: LocalDeps) {
  const failures = new FailureLimiter(20, 60_000, deps.now);

  /**
   * Which app is calling: the sidecar's, or the one whose key and secret are in the headers. The
   * edge never holds app secrets: the registry checks them (constant time) and a pass is
   * remembered for a few seconds, per key and secret digest. Right credentials are checked before
   * the limit, so they are never refused for someone else's failures; only guessing is slowed.
   */
  async function caller(req: RequestHead): Promise<AppView> {
    if (deps.sidecarApp) {
      const app = deps.cache.app(deps.sidecarApp.user, deps.sidecarApp.app);
      if (!app) throw new PierError('UNAVAILABLE', `app ${deps.sidecarApp.user}/${deps.sidecarApp.app} is not installed`);
      return app;
    }
    const key = req.headers['x-app-key'] ?? '';
    const secret = req.headers['x-app-secret'] ?? '';
    const app = key ? deps.cache.appByKey(key) : undefined;
    if (app && secret) {
      const digest = sha256Hex(secret);
      const now = deps.now();
      if (deps.verified.passedFor(key, digest, now)) return app;
      const verified = await ask(deps.bus, registry.appVerify, { appKey: key, secret: secret.slice(0, 256) }).catch((err: unknown) => {
        if (err instanceof PierError && err.code === 'UNAUTHORIZED') return null;
        throw err; // the registry unreachable: 503, not a verdict on the credentials
      });
      if (verified?.app === app.id) {
        deps.verified.rememberFor(key, digest, Number.MAX_SAFE_INTEGER, now);
        return app;
      }
    }
    if (failures.blocked(req.remoteAddress)) throw new PierError('RATE_LIMITED', 'too many failed attempts; retry later');
    failures.fail(req.remoteAddress);
    throw new PierError('UNAUTHORIZED', 'X-App-Key and X-App-Secret are required and must match an installed app');
  }

  async function toConn(connId: string, cmd: Omit<ConnCommand, 'connIds'>): Promise<number> {
    const edge = edgeOfConn(connId);
    if (edge === undefined) return 0;
    try {
      return (await ask(deps.bus, at(gatewayChannels.command, gatewaySubjects.edge(edge)), { ...cmd, connIds: [connId] })).count;
    } catch (err) {
      if (err instanceof PierError && err.code === 'UNAVAILABLE') return 0; // its edge is gone, and the connection with it
      throw err;
    }
  }

  async function toUsers(users: string[], cmd: Omit<ConnCommand, 'users'>): Promise<number> {
    const counts = await Promise.all(
      [...new Set(users)].map(async (user) => {
        const replies = await gather(deps.bus, at(gatewayChannels.command, gatewaySubjects.user(user, parseAppId(cmd.appId)!.app)), { ...cmd, users: [user] }, { stallMs: 25 });
        return replies.reduce((n, r) => n + r.count, 0);
      }),
    );
    return counts.reduce((a, b) => a + b, 0);
  }

  return {
    /**
     * Which app is calling, checked before the body is read (the routes' gate): a caller without
     * credentials never has its body read, and only an app's traceparent is followed for sampling
     * (docs/operations.md "Tracing"). The handlers ask again, from the pass just remembered.
     */
    async gate(req: RequestHead): Promise<null> {
      await caller(req);
      return null;
    },

    async send(req: HttpRequestData): Promise<HttpReply> {
      const app = await caller(req);
      const body = parseJsonBody(req);
      assertValid(sendSchema, body);
      const hasConn = typeof body.conn_id === 'string' && body.conn_id !== '';
      const users = (body.users as string[] | undefined) ?? [];
      if (hasConn === users.length > 0) throw new PierError('BAD_REQUEST', 'give exactly one of conn_id and a non-empty users');
      const cmd = { op: 'send' as const, appId: app.id, text: JSON.stringify(body.payload) };
      if (hasConn) {
        const delivered = await toConn(body.conn_id as string, cmd);
        if (delivered === 0) throw new PierError('NOT_FOUND', `connection "${body.conn_id}" is not open`);
        return ok({ delivered, kept: false });
      }
      // Kept first (an app instance is one user's: only its own user's connections can get it), then
      // sent: `send` answers once the message is in the history, and every edge delivers it in its turn.
      const kept = deps.history && users.includes(app.user) ? await deps.history.keep(app, cmd.text) : null;
      const delivered = await toUsers(users, kept ? { ...cmd, kept: { epoch: kept.epoch, seq: kept.seq, prev: kept.prev } } : cmd);
      return ok(kept?.whole ? { delivered, kept: true, offset: kept.seq, epoch: kept.epoch } : { delivered, kept: false });
    },

    async close(req: HttpRequestData): Promise<HttpReply> {
      const app = await caller(req);
      const body = parseJsonBody(req);
      assertValid(closeSchema, body);
      const conns = (body.conns as string[] | undefined) ?? [];
      const users = (body.users as string[] | undefined) ?? [];
      if (conns.length === 0 && users.length === 0) throw new PierError('BAD_REQUEST', 'give a non-empty conns or users');
      const cmd = { op: 'close' as const, appId: app.id };
      // Connections first, then users: a connection named both ways is closed (and counted) once.
      const byConn = await Promise.all([...new Set(conns)].map((id) => toConn(id, cmd)));
      const byUser = await toUsers(users, cmd);
      return ok({ closed: byConn.reduce((a, b) => a + b, 0) + byUser });
    },

    async list(req: HttpRequestData): Promise<HttpReply> {
      const app = await caller(req);
      const edges = deps.peers.alive('edge').length;
      const replies = await gather(deps.bus, at(gatewayChannels.list, gatewaySubjects.list), { appId: app.id }, { timeoutMs: 1_000, stallMs: 1_000, expected: edges });
      const byUser = new Map<string, { id: string; userAgent: string }[]>();
      for (const r of replies) {
        for (const c of r.conns) {
          const list = byUser.get(c.user) ?? [];
          list.push({ id: c.id, userAgent: c.userAgent });
          byUser.set(c.user, list);
        }
      }
      const data = [...byUser].sort(([a], [b]) => a.localeCompare(b)).map(([name, conns]) => ({ name, conns }));
      const json: Record<string, unknown> = { code: 0, message: 'success', data };
      if (replies.length < edges) json.partial = true;
      return { status: 200, json };
    },
  };
}

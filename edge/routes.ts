import { adminAnswers } from './admin/admin-api.js';
import { clusterMetrics } from './admin/admin-status.js';
import { envelopedAll, requireAdmin, type AdminDeps, type AnswerHandlers } from './admin/answers.js';
import { ADMIN_API, type AdminRouteName } from './admin/api.js';
import { liveAnswers } from './admin/live-api.js';
import { consoleRoutes, type ConsoleOptions } from './admin/console-api.js';
import { ConsoleSessions } from './admin/console-session.js';
import { NO_HISTORY, sampledHistory } from './admin/history-sampler.js';
import { healthz, readyz, type Drain } from './http/health.js';
import { accessToken, providerCall, providerCallGate, providerCallPassed, type SystemDeps } from './system/system-api.js';
import { isVaultCall, vaultCall, vaultCallGate, vaultCallPassed, type VaultApiDeps } from './system/vault-api.js';
import { localApi, type LocalDeps } from './gateway/local-api.js';
import { tusApi } from './upload/tus-api.js';
import { BlockPool } from './http/block-pool.js';
import { uploadApi, type UploadApiDeps } from './upload/upload-api.js';
import type { RequestHead, Route } from './http/http.js';

/** The listeners of contract section 8, by name. */
export const LISTENERS = ['public', 'system', 'local', 'upload', 'admin'] as const;
export type ListenerName = (typeof LISTENERS)[number];

/**
 * Every route of every listener, in one table. Features land here as their issues do; until then a
 * listener answers its probes and 404.
 */
export function routeTable(deps: AdminDeps & SystemDeps & VaultApiDeps & LocalDeps & UploadApiDeps & { adminBodyBytes: number; providerBodyBytes: number; console?: ConsoleOptions; drain?: Drain }): Record<ListenerName, Route[]> {
  const probes: Route[] = [
    { method: 'get', path: '/healthz', handler: healthz },
    { method: 'get', path: '/readyz', handler: () => readyz(deps.bus, deps.cache, undefined, deps.drain) },
  ];
  // The console's sessions, which the admin API accepts too, and its sampled figures: made here, once,
  // and passed to what reads them (nothing sets them on `deps` behind the others' backs).
  const sessions = deps.console ? new ConsoleSessions({ ttlMs: deps.console.sessionMs, max: 100, now: deps.console.now }) : undefined;
  const history = deps.console ? sampledHistory(deps, deps.console.sampleMs) : NO_HISTORY;
  const operator: AdminDeps = sessions ? { ...deps, sessions } : deps;
  const answers: AnswerHandlers = { ...adminAnswers(operator), ...liveAnswers(operator, history) };
  const admin = envelopedAll(operator, answers);
  const adminBody: Partial<Record<AdminRouteName, number>> = {
    userAdd: deps.adminBodyBytes,
    appInstall: deps.adminBodyBytes,
    stateImport: deps.adminBodyBytes,
    // A secret is at most 64 KiB (docs/protocol.md "Vault"): its JSON, escaped, fits twice that.
    vaultSet: 128 * 1024,
    vaultSetByPath: 128 * 1024,
    // `{version}` alone.
    vaultRestore: 1024,
    vaultDestroy: 1024,
    connectionsClose: 128 * 1024,
  };
  /**
   * What the operator changed, logged at info once answered: who-what-outcome from the method, the
   * path (names only) and the status; never a body (tokens, secrets and values live there).
   */
  const audited = (handler: Route['handler']): Route['handler'] => async (req) => {
    const reply = await handler(req);
    deps.log?.info({ admin: `${req.method.toUpperCase()} ${req.path}`, status: reply.status }, 'admin action');
    return reply;
  };
  const operatorGate = async (req: RequestHead) => {
    requireAdmin(operator, req);
    return null;
  };
  const local = localApi(deps);
  // Both upload protocols copy their bodies out of uWS into one pool of reused blocks (edge/http/block-pool.ts).
  const uploadBodies = new BlockPool();
  const uploads = uploadApi({ ...deps, bodyPool: uploadBodies });
  const tus = tusApi({ ...deps, bodyPool: uploadBodies });
  return {
    public: [...probes],
    system: [
      ...probes,
      { method: 'post', path: '/permission/v1alpha1/access', handler: (req) => accessToken(deps, req), bodyLimit: 64 * 1024 },
      {
        method: 'any',
        path: '/system-server/v1alpha1/:dataType/:group/:version/:op',
        // One pattern for both: the vault is the provider `secret` to apps, told apart once the path is decoded.
        handler: (req) => (isVaultCall(req) ? vaultCall(deps, req) : providerCall(deps, req)),
        bodyLimit: deps.providerBodyBytes,
        // The access token is checked before any of the body is read (docs/protocol.md "Provider calls" and docs/protocol.md "Vault").
        gate: (req) => (isVaultCall(req) ? vaultCallGate(deps, req) : providerCallGate(deps, req)),
        gatePassed: (req) => (isVaultCall(req) ? vaultCallPassed(deps, req) : providerCallPassed(deps, req)),
        gateChecksCaller: true,
      },
    ],
    // `/runtime/ws/conn/*` is the contract's path; `/tapr/ws/conn/*` is the one the platform's existing apps call.
    local: [
      ...probes,
      ...['/runtime', '/tapr'].flatMap((prefix): Route[] => [
        { method: 'post', path: `${prefix}/ws/conn/send`, handler: local.send, bodyLimit: 1024 * 1024, gate: local.gate, gateChecksCaller: true },
        { method: 'post', path: `${prefix}/ws/conn/close`, handler: local.close, bodyLimit: 1024 * 1024, gate: local.gate, gateChecksCaller: true },
        { method: 'get', path: `${prefix}/ws/conn/list`, handler: local.list, gate: local.gate, gateChecksCaller: true },
      ]),
    ],
    upload: [
      ...probes,
      { method: 'post', path: '/upload/', handler: uploads.create, bodyLimit: 64 * 1024 },
      { method: 'post', path: '/upload', handler: uploads.create, bodyLimit: 64 * 1024 },
      { method: 'options', path: '/upload/', handler: uploads.preflight },
      { method: 'options', path: '/upload', handler: uploads.preflight },
      { method: 'get', path: '/upload/:uid', handler: uploads.status },
      { method: 'patch', path: '/upload/:uid', handler: uploads.append, streamBody: true, bodyPool: uploadBodies },
      { method: 'options', path: '/upload/:uid', handler: uploads.preflight },
      // tus 1.0 (docs/upload.md "tus 1.0 (`/tus/`)"): the same engine, another wire format.
      { method: 'post', path: '/tus/', handler: tus.create, streamBody: true, bodyPool: uploadBodies },
      { method: 'post', path: '/tus', handler: tus.create, streamBody: true, bodyPool: uploadBodies },
      { method: 'options', path: '/tus/', handler: tus.options },
      { method: 'options', path: '/tus', handler: tus.options },
      { method: 'head', path: '/tus/:id', handler: tus.head },
      { method: 'patch', path: '/tus/:id', handler: tus.patch, streamBody: true, bodyPool: uploadBodies },
      { method: 'del', path: '/tus/:id', handler: tus.terminate },
      { method: 'post', path: '/tus/:id', handler: tus.override, streamBody: true, bodyPool: uploadBodies },
      { method: 'options', path: '/tus/:id', handler: tus.options },
    ],
    admin: [
      { method: 'get', path: '/healthz', handler: healthz },
      { method: 'get', path: '/readyz', handler: () => readyz(deps.bus, deps.cache, deps.peers) },
      { method: 'get', path: '/metrics', handler: () => clusterMetrics(deps.bus, deps.peers) },
      // Every admin route as edge/admin/api.ts declares it; a change is logged once answered. The
      // operator is checked before the body too (the handler checks again: a few microseconds).
      ...(Object.keys(ADMIN_API) as AdminRouteName[]).map((name): Route => {
        const r = ADMIN_API[name];
        const limit = adminBody[name];
        return { method: r.method, path: r.path, handler: r.changes ? audited(admin[name]) : admin[name], gate: operatorGate, gateChecksCaller: true, ...(limit === undefined ? {} : { bodyLimit: limit }) };
      }),
      ...(deps.console && sessions ? consoleRoutes(deps, deps.console, sessions) : []),
    ],
  };
}

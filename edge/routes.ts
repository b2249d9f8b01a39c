import { clusterMetrics, adminHandlers, type AdminDeps } from './admin/admin-api.js';
import { consoleRoutes, type ConsoleOptions } from './admin/console-api.js';
import { healthz, readyz } from './http/health.js';
import { accessToken, providerCall, providerCallGate, type SystemDeps } from './system/system-api.js';
import { isVaultCall, vaultCall, vaultCallGate, type VaultApiDeps } from './system/vault-api.js';
import { localApi, type LocalDeps } from './gateway/local-api.js';
import { tusApi } from './upload/tus-api.js';
import { uploadApi, type UploadApiDeps } from './upload/upload-api.js';
import type { Route } from './http/http.js';

/** The listeners of contract section 8, by name. */
export const LISTENERS = ['public', 'system', 'local', 'upload', 'admin'] as const;
export type ListenerName = (typeof LISTENERS)[number];

/**
 * Every route of every listener, in one table. Features land here as their issues do; until then a
 * listener answers its probes and 404.
 */
export function routeTable(deps: AdminDeps & SystemDeps & VaultApiDeps & LocalDeps & UploadApiDeps & { adminBodyBytes: number; providerBodyBytes: number; console?: ConsoleOptions }): Record<ListenerName, Route[]> {
  const probes: Route[] = [
    { method: 'get', path: '/healthz', handler: healthz },
    { method: 'get', path: '/readyz', handler: () => readyz(deps.bus, deps.cache) },
  ];
  const admin = adminHandlers(deps);
  /**
   * What the operator changed, logged at info once answered: who-what-outcome from the method, the
   * path (names only) and the status; never a body (tokens, secrets and values live there).
   */
  const audited = (handler: Route['handler']): Route['handler'] => async (req) => {
    const reply = await handler(req);
    deps.log?.info({ admin: `${req.method.toUpperCase()} ${req.path}`, status: reply.status }, 'admin action');
    return reply;
  };
  const local = localApi(deps);
  const uploads = uploadApi(deps);
  const tus = tusApi(deps);
  const body = deps.adminBodyBytes;
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
      },
    ],
    // `/runtime/ws/conn/*` is the contract's path; `/tapr/ws/conn/*` is the one the platform's existing apps call.
    local: [
      ...probes,
      ...['/runtime', '/tapr'].flatMap((prefix): Route[] => [
        { method: 'post', path: `${prefix}/ws/conn/send`, handler: local.send, bodyLimit: 1024 * 1024 },
        { method: 'post', path: `${prefix}/ws/conn/close`, handler: local.close, bodyLimit: 1024 * 1024 },
        { method: 'get', path: `${prefix}/ws/conn/list`, handler: local.list },
      ]),
    ],
    upload: [
      ...probes,
      { method: 'post', path: '/upload/', handler: uploads.create, bodyLimit: 64 * 1024 },
      { method: 'post', path: '/upload', handler: uploads.create, bodyLimit: 64 * 1024 },
      { method: 'options', path: '/upload/', handler: uploads.preflight },
      { method: 'options', path: '/upload', handler: uploads.preflight },
      { method: 'get', path: '/upload/:uid', handler: uploads.status },
      { method: 'patch', path: '/upload/:uid', handler: uploads.append, streamBody: true },
      { method: 'options', path: '/upload/:uid', handler: uploads.preflight },
      // tus 1.0 (docs/upload.md "tus 1.0 (`/tus/`)"): the same engine, another wire format.
      { method: 'post', path: '/tus/', handler: tus.create, streamBody: true },
      { method: 'post', path: '/tus', handler: tus.create, streamBody: true },
      { method: 'options', path: '/tus/', handler: tus.options },
      { method: 'options', path: '/tus', handler: tus.options },
      { method: 'head', path: '/tus/:id', handler: tus.head },
      { method: 'patch', path: '/tus/:id', handler: tus.patch, streamBody: true },
      { method: 'del', path: '/tus/:id', handler: tus.terminate },
      { method: 'post', path: '/tus/:id', handler: tus.override, streamBody: true },
      { method: 'options', path: '/tus/:id', handler: tus.options },
    ],
    admin: [
      { method: 'get', path: '/healthz', handler: healthz },
      { method: 'get', path: '/readyz', handler: () => readyz(deps.bus, deps.cache, deps.peers) },
      { method: 'get', path: '/metrics', handler: () => clusterMetrics(deps.bus, deps.peers) },
      { method: 'get', path: '/admin/v1/status', handler: admin.status },
      { method: 'get', path: '/admin/v1/users', handler: admin.userList },
      { method: 'post', path: '/admin/v1/users', handler: audited(admin.userAdd), bodyLimit: body },
      { method: 'post', path: '/admin/v1/users/:name/tokens', handler: audited(admin.userToken) },
      { method: 'post', path: '/admin/v1/users/:name/revoke', handler: audited(admin.userRevoke) },
      { method: 'get', path: '/admin/v1/apps', handler: admin.appList },
      { method: 'post', path: '/admin/v1/apps', handler: audited(admin.appInstall), bodyLimit: body },
      { method: 'del', path: '/admin/v1/apps/:user/:app', handler: audited(admin.appUninstall) },
      { method: 'get', path: '/admin/v1/providers', handler: admin.providerList },
      { method: 'post', path: '/admin/v1/providers/:name/suspend', handler: audited(admin.providerSetState('suspended')) },
      { method: 'post', path: '/admin/v1/providers/:name/resume', handler: audited(admin.providerSetState('active')) },
      { method: 'get', path: '/admin/v1/vault/audit', handler: admin.vaultAudit },
      { method: 'get', path: '/admin/v1/vault/secrets', handler: admin.vaultOperator('list') },
      { method: 'get', path: '/admin/v1/vault/secrets/:name', handler: audited(admin.vaultOperator('get')) },
      // The same, the name in the query: a URL collapses the names `.` and `..` (even as %2E) in a path.
      { method: 'get', path: '/admin/v1/vault/secret', handler: audited(admin.vaultOperator('get')) },
      { method: 'put', path: '/admin/v1/vault/secret', handler: audited(admin.vaultOperator('set')), bodyLimit: 128 * 1024 },
      { method: 'del', path: '/admin/v1/vault/secret', handler: audited(admin.vaultOperator('delete')) },
      { method: 'put', path: '/admin/v1/vault/secrets/:name', handler: audited(admin.vaultOperator('set')), bodyLimit: 128 * 1024 },
      { method: 'del', path: '/admin/v1/vault/secrets/:name', handler: audited(admin.vaultOperator('delete')) },
      { method: 'del', path: '/admin/v1/vault/secrets', handler: audited(admin.vaultOperator('purge')) },
      { method: 'post', path: '/admin/v1/vault/rotate-master-key', handler: audited(admin.rotateMasterKey) },
      { method: 'get', path: '/admin/v1/state', handler: admin.stateExport },
      { method: 'post', path: '/admin/v1/state', handler: audited(admin.stateImport), bodyLimit: body },
      ...(deps.console ? consoleRoutes(deps, deps.console).routes : []),
    ],
  };
}

/**
 * The admin API, declared once (docs/protocol.md "Admin API"): every route's method, path, request
 * and answer. The server mounts its handlers from this table (edge/routes.ts) and must answer the
 * declared type; the CLI calls through it (cli/admin-client.ts `adminCall`); the console's JSDoc
 * types name these interfaces; docs/protocol.md is checked against it (test/unit/docs-reference.test.ts).
 *
 * One naming convention on the wire: camelCase. A field renamed to it keeps its former name too for
 * one release (marked `@deprecated`, listed in CHANGELOG.md), so a script reading `--json` keeps working.
 */

import type { AppRow, InstallRequest, Installed, IssuedToken, ProviderRow, Revoked, Uninstalled, UserRow } from './api-users.js';
import type { AuditRow, DeletedSecretRow, Purged, Rekeyed, Rotated, SecretDeleted, SecretDestroyed, SecretRestored, SecretRow, SecretSet, SecretUndeleted, SecretValue, SecretVersions, VaultTarget } from './api-vault.js';
import type { Status } from './api-processes.js';
import type { AppConnections, Closed, CloseRequest, MetricsHistoryAnswer, Uploads } from './api-live.js';

// ---- Answers and request bodies, one file per group of routes ----

export type * from './api-users.js';
export type * from './api-vault.js';
export type * from './api-processes.js';
export type * from './api-live.js';

export interface Imported {
  imported: number;
}

// ---- Routes ----

export type AdminMethod = 'get' | 'post' | 'put' | 'del';

/** One admin route. `Answer`, `Body` and `Query` exist only as types (what callers and handlers compile against). */
export interface AdminRoute<Path extends string = string, Answer = unknown, Body = unknown, Query = unknown> {
  readonly method: AdminMethod;
  readonly path: Path;
  /** Changes something: logged as an admin action once answered (edge/routes.ts). */
  readonly changes: boolean;
  /** Phantom fields: never set, read only by the type checker. */
  readonly answer?: Answer;
  readonly body?: Body;
  readonly query?: Query;
}

/** Names a route takes in its path (`/users/:name/tokens` → `{name: string}`). */
export type PathParams<P extends string> = P extends `${string}:${infer Name}/${infer Rest}`
  ? { [K in Name]: string } & PathParams<`/${Rest}`>
  : P extends `${string}:${infer Name}`
    ? { [K in Name]: string }
    : Record<never, never>;

export type AnswerOf<R> = R extends AdminRoute<string, infer A, unknown, unknown> ? A : never;
export type BodyOf<R> = R extends AdminRoute<string, unknown, infer B, unknown> ? B : never;
export type QueryOf<R> = R extends AdminRoute<string, unknown, unknown, infer Q> ? Q : never;

function route<Answer, Body = undefined, Query = undefined>() {
  return <P extends string>(method: AdminMethod, path: P, changes = method !== 'get'): AdminRoute<P, Answer, Body, Query> => ({ method, path, changes });
}

/** An NDJSON stream (`pier state export`), not an envelope. */
export interface NdjsonStream {
  readonly ndjson: true;
}

/** Every admin route. The order is docs/protocol.md's. */
export const ADMIN_API = {
  status: route<Status>()('get', '/admin/v1/status'),
  userList: route<UserRow[]>()('get', '/admin/v1/users'),
  userAdd: route<IssuedToken, { name: string }>()('post', '/admin/v1/users'),
  userToken: route<IssuedToken>()('post', '/admin/v1/users/:name/tokens'),
  userRevoke: route<Revoked>()('post', '/admin/v1/users/:name/revoke'),
  appList: route<AppRow[], undefined, { user?: string }>()('get', '/admin/v1/apps'),
  appInstall: route<Installed, InstallRequest>()('post', '/admin/v1/apps'),
  appUninstall: route<Uninstalled, undefined, { purge?: 'true' | 'false' }>()('del', '/admin/v1/apps/:user/:app'),
  providerList: route<ProviderRow[]>()('get', '/admin/v1/providers'),
  providerSuspend: route<ProviderRow>()('post', '/admin/v1/providers/:name/suspend'),
  providerResume: route<ProviderRow>()('post', '/admin/v1/providers/:name/resume'),
  vaultAudit: route<AuditRow[], undefined, { user?: string; app?: string; op?: string; limit?: string }>()('get', '/admin/v1/vault/audit'),
  vaultList: route<SecretRow[], undefined, VaultTarget>()('get', '/admin/v1/vault/secrets'),
  vaultPurge: route<Purged, undefined, { user: string; workspace: string }>()('del', '/admin/v1/vault/secrets'),
  // A value read is logged as an admin action too: who looked at which secret.
  vaultGetByPath: route<SecretValue, undefined, VaultTarget>()('get', '/admin/v1/vault/secrets/:name', true),
  vaultSetByPath: route<SecretSet, { value: string }, VaultTarget>()('put', '/admin/v1/vault/secrets/:name'),
  vaultDeleteByPath: route<SecretDeleted, undefined, VaultTarget>()('del', '/admin/v1/vault/secrets/:name'),
  // The same three, the name in the query: a URL collapses the names `.` and `..` (even as %2E) in a path.
  vaultGet: route<SecretValue, undefined, VaultTarget & { name: string }>()('get', '/admin/v1/vault/secret', true),
  vaultVersions: route<SecretVersions, undefined, VaultTarget & { name: string; deleted?: 'true' | 'false' }>()('get', '/admin/v1/vault/versions'),
  vaultDeleted: route<DeletedSecretRow[], undefined, VaultTarget>()('get', '/admin/v1/vault/deleted'),
  vaultRestore: route<SecretRestored, { version: number }, VaultTarget & { name: string }>()('post', '/admin/v1/vault/secret/restore'),
  vaultUndelete: route<SecretUndeleted, undefined, VaultTarget & { name: string }>()('post', '/admin/v1/vault/secret/undelete'),
  vaultDestroy: route<SecretDestroyed, { version?: number }, VaultTarget & { name: string }>()('post', '/admin/v1/vault/secret/destroy'),
  vaultSet: route<SecretSet, { value: string }, VaultTarget & { name: string }>()('put', '/admin/v1/vault/secret'),
  vaultDelete: route<SecretDeleted, undefined, VaultTarget & { name: string }>()('del', '/admin/v1/vault/secret'),
  rotateMasterKey: route<Rotated>()('post', '/admin/v1/vault/rotate-master-key'),
  vaultFormats: route<Rekeyed>()('get', '/admin/v1/vault/rekey'),
  vaultRekey: route<Rekeyed, { limit?: number }>()('post', '/admin/v1/vault/rekey'),
  stateExport: route<NdjsonStream>()('get', '/admin/v1/state'),
  stateImport: route<Imported, string, { first?: 'true' | 'false'; line?: string }>()('post', '/admin/v1/state'),
  connections: route<AppConnections[], undefined, { user?: string; app?: string }>()('get', '/admin/v1/connections'),
  connectionsClose: route<Closed, CloseRequest>()('post', '/admin/v1/connections/close'),
  uploads: route<Uploads, undefined, { limit?: string }>()('get', '/admin/v1/uploads'),
  metricsHistory: route<MetricsHistoryAnswer>()('get', '/admin/v1/metrics/history'),
} as const;

export type AdminApi = typeof ADMIN_API;
export type AdminRouteName = keyof AdminApi;

/** A path with its `:names` filled in, each encoded. */
export function fillPath(path: string, params: Record<string, string>): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const v = params[name] as string | undefined;
    if (v === undefined) throw new Error(`${path}: no value for :${name}`);
    return encodeURIComponent(v);
  });
}

/**
 * The admin API, declared once (docs/protocol.md "Admin API"): every route's method, path, request
 * and answer. The server mounts its handlers from this table (edge/routes.ts) and must answer the
 * declared type; the CLI calls through it (cli/admin-client.ts `adminCall`); the console's JSDoc
 * types name these interfaces; docs/protocol.md is checked against it (test/unit/docs-reference.test.ts).
 *
 * One naming convention on the wire: camelCase. A field renamed to it keeps its former name too for
 * one release (marked `@deprecated`, listed in CHANGELOG.md), so a script reading `--json` keeps working.
 */

// ---- Answers and request bodies ----

export interface UserRow {
  name: string;
  tokens: number;
  createdAt: string;
}

export interface IssuedToken {
  name: string;
  token: string;
}

export interface Revoked {
  name: string;
  revoked: number;
}

export interface InstallRequest {
  user: string;
  /** The manifest's YAML text. */
  manifest: string;
  /** Provider YAML texts the app registers. */
  providers?: string[];
  host?: string;
  credentials?: { OS_APP_KEY: string; OS_APP_SECRET: string };
  /** Its upload folder may nest with other apps' of the user: the operator vouches that they trust each other. */
  sharedDest?: boolean;
}

export interface Installed {
  app: string;
  user: string;
  /** The environment the app runs with. */
  env: { OS_SYSTEM_SERVER: string; OS_APP_KEY: string; OS_APP_SECRET: string };
  /** The user's folder for the app's uploads (host path); null when the app takes none or it could not be made now. */
  uploadDir: string | null;
  /** Why `uploadDir` is null although the app takes uploads. */
  uploadDirError?: string;
}

export interface GrantRow {
  dataType: string;
  group: string;
  version: string;
  ops: string[];
}

export interface AppRow {
  user: string;
  app: string;
  version: string;
  host: string;
  appKey: string;
  providers: string[];
  installedAt: string;
  sharedDest: boolean;
  /** What it may call; absent while this admin process's registry cache has not heard of it yet. */
  grants?: GrantRow[];
  /** Its manifest's `upload.dest` (the app's view), null when it takes no uploads; absent as `grants`. */
  uploadDest?: string | null;
  /** @deprecated 0.1 name of `uploadDest`, removed in 0.3. */
  upload_dest?: string | null;
}

export interface Uninstalled {
  app: string;
  user: string;
  purged: boolean;
}

export interface ProviderRow {
  name: string;
  user: string;
  app: string;
  namespace: string;
  version: 'v1' | 'v2';
  dataType: string;
  group: string;
  endpoint: string;
  deployment: string;
  description: string;
  opApis: Array<{ name: string; uri: string }>;
  state: 'active' | 'suspended';
  appliedAt: string;
}

export interface AuditRow {
  at: string;
  user: string | null;
  app: string | null;
  op: string;
  workspace: string;
  env: string | null;
  name: string | null;
  /** `ok`, or the error code of a refusal or failure. */
  outcome: string;
}

/** Beside `data` of `GET /admin/v1/vault/audit` when the search stopped before `limit` matches (older entries not searched). */
export interface AuditSearched {
  entries: number;
  /** When the oldest entry searched was written. */
  backTo: string | null;
  complete: false;
}

export interface SecretRow {
  name: string;
  version: number;
  updatedAt: string;
  updatedBy: string;
}

export interface SecretValue {
  name: string;
  env: string;
  value: string;
  version: number;
}

/**
 * `pier vault versions`: who wrote each version of a secret and when, newest first; never a value.
 * `kept`: its value is kept (restorable). `deleted`: set when the secret is deleted (docs/vault.md "Versions").
 */
export interface SecretVersions {
  name: string;
  env: string;
  version: number;
  versions: Array<{ version: number; at: string; by: string; size: number | null; current: boolean; kept: boolean }>;
  deleted: { at: string; by: string; destroyAt: string } | null;
}

/** `pier vault list --deleted`: the deleted secrets of a workspace, recoverable until `destroyAt`. */
export interface DeletedSecretRow {
  name: string;
  version: number;
  deletedAt: string;
  deletedBy: string;
  destroyAt: string;
  versionsKept: number;
}

/** `pier vault restore`: the new version, whose value is version `restored`'s. */
export interface SecretRestored {
  name: string;
  env: string;
  version: number;
  restored: number;
}

/** `pier vault undelete`: the secret back, at the version it had. */
export interface SecretUndeleted {
  name: string;
  env: string;
  version: number;
}

/** `pier vault destroy`: the versions whose values are gone for good. */
export interface SecretDestroyed {
  name: string;
  env: string;
  destroyed: number[];
}

export interface SecretSet {
  name: string;
  env: string;
  version: number;
}

export interface SecretDeleted {
  deleted: string;
  env: string;
}

export interface Purged {
  purged: number;
}

/**
 * `pier vault rekey [--status]` (docs/vault.md "Destroyed"): live secrets and kept
 * versions under value keys of their own (`valueKeys`) and still under their scope's data key
 * (`dataKeys`); what this call sealed anew, what it could not open, and whether new values are
 * sealed under value keys now (every vault replica speaks wire format 3).
 */
export interface Rekeyed {
  secrets: { valueKeys: number; dataKeys: number };
  versions: { valueKeys: number; dataKeys: number };
  rekeyed: number;
  unreadable: number;
  sealingUnderValueKeys: boolean;
}

export interface Rotated {
  rewrappedDataKeys: number;
  resealedAppSecrets: number;
  /** @deprecated 0.1 name of `rewrappedDataKeys`, removed in 0.3. */
  rewrapped_data_keys: number;
  /** @deprecated 0.1 name of `resealedAppSecrets`, removed in 0.3. */
  resealed_app_secrets: number;
}

export interface Imported {
  imported: number;
}

export interface EndpointRow {
  subject: string;
  requests: number;
  errors: number;
  processingMs: number;
  averageMs: number;
  /** The last error answered, a client's refusal (4xx) or a fault (5xx). */
  lastError: { code: string; message: string; at: string } | null;
  /** Answers that were the process's own failure (5xx); absent from a process older than the field. */
  faults?: number;
  lastFault?: { code: string; message: string; at: string } | null;
}

export interface ReplicaRow {
  id: string;
  /** Dot-free id used inside subjects and connection ids. */
  busId: string;
  roles: string[];
  pid: number;
  host: string;
  startedAt: string;
  version?: string;
  /** The wire formats it speaks (docs/operations.md "Upgrading"); a process before 0.2.0 says none: 1 to 1. */
  wire: { speaks: number; oldest: number };
  counters: Record<string, number>;
  /** Its actor endpoints' figures by `<role>.<endpoint>`; absent for a process that serves none. */
  endpoints?: Record<string, EndpointRow>;
}

/** A live process that shares no wire format with the admin process (docs/operations.md "Upgrading"). */
export interface MismatchRow {
  id: string;
  roles: string[];
  version: string | null;
  /** The wire formats it speaks (1 to 1 for a process that does not say). */
  wire: { speaks: number; oldest: number };
}

export interface Status {
  roles: string[];
  /** Processes outside this admin's wire window: nothing is routed to them (a rolling upgrade skipped a release). */
  mismatched: MismatchRow[];
  /** The wire formats this admin process speaks. */
  wire: { speaks: number; oldest: number };
  /** Roles no live process runs: their requests answer 503 until one starts. */
  missingRoles: string[];
  /** @deprecated 0.1 name of `missingRoles`, removed in 0.3. */
  missing_roles: string[];
  bus: { kind: string; connected: boolean };
  registry: { revision: number; fresh: boolean };
  replicas: ReplicaRow[];
  connections: number;
  uploads: number;
}

export interface ConnectionRow {
  id: string;
  user: string;
  userAgent: string;
  /** The bus id of the edge holding it, from its id; null when the id names none. */
  edge: string | null;
  /** That edge's process id (as `pier status` names it); null when no live edge has that bus id. */
  process: string | null;
}

export interface AppConnections {
  user: string;
  app: string;
  conns: ConnectionRow[];
}

export interface CloseRequest {
  user: string;
  app: string;
  conns: string[];
}

export interface Closed {
  closed: number;
}

export interface UploadRow {
  id: string;
  user: string;
  app: string;
  /** The target in the app's view. */
  path: string;
  offset: number;
  /** null while a tus upload's length is deferred. */
  size: number | null;
  protocol: 'tus' | 'upload';
  writing: boolean;
  /** ms since the epoch */
  updatedAt: number;
}

export interface Uploads {
  uploads: UploadRow[];
  truncated: boolean;
}

export interface MetricsSample {
  /** ms since the epoch */
  at: number;
  httpRequestsPerSecond: number;
  /** p99 of HTTP handling over the interval (upper bound of its histogram bucket), ms; null when nothing was served. */
  httpP99Ms: number | null;
  providerCallsPerSecond: number;
  vaultOpsPerSecond: number;
  wsMessagesPerSecond: number;
  callbackRetriesPerSecond: number;
  busRefusalsPerSecond: number;
  wsConnections: number;
  uploadsActive: number;
  /** Requests per second by route (`<listener> <METHOD path>`), the interval's busiest. */
  routes: Record<string, number>;
}

/** The 0.1 names of a sample's fields, kept for one release (removed in 0.3). */
export interface MetricsSampleFormerNames {
  /** @deprecated */ http_requests_per_s: number;
  /** @deprecated */ http_p99_ms: number | null;
  /** @deprecated */ provider_calls_per_s: number;
  /** @deprecated */ vault_ops_per_s: number;
  /** @deprecated */ ws_messages_per_s: number;
  /** @deprecated */ callback_retries_per_s: number;
  /** @deprecated */ bus_refusals_per_s: number;
  /** @deprecated */ ws_connections: number;
  /** @deprecated */ uploads_active: number;
}

export interface MetricsHistoryAnswer {
  everyMs: number;
  /** @deprecated 0.1 name of `everyMs`, removed in 0.3. */
  every_ms: number;
  samples: Array<MetricsSample & MetricsSampleFormerNames>;
}

/** The console's session (`/console/session`): the CSRF token its changes carry. */
export interface ConsoleSession {
  csrf: string;
  expiresAt: string;
  /** @deprecated 0.1 name of `expiresAt`, removed in 0.3. */
  expires_at: string;
}

// ---- Query parameters ----

export interface VaultTarget {
  user: string;
  workspace: string;
  env?: 'test' | 'dev' | 'staging' | 'prod';
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

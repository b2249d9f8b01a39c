import { ask } from '../../bus/verbs.js';
import { OLDEST_WIRE_VERSION, WIRE_VERSION } from '../../bus/envelope.js';
import type { Bus } from '../../bus/bus.js';
import { ErrorReasons, PierError } from '../../bus/errors.js';
import { APP_NAME_RULE, USER_NAME_RULE, credentialsSchema, registry, stateEndpoints, upload, vault, USER_NAME, APP_NAME, type EndpointStats, FIRST_WIRE, OPERATOR_IN_AUDIT, OPERATOR_VERSIONS_WIRE, REKEY_WIRE, isOperatorVersionOp, type RekeyAnswer, type RekeyRequest, type AuditQuery, type ImportedCredentials, type OperatorVaultAnswers, type OperatorVaultRequest, type ProcessInfo, type ProviderState, type ProviderView } from '../../bus/subjects.js';
import type { AdminApi, AdminRouteName, AnswerOf, AppRow, AuditRow, ProviderRow, ReplicaRow } from './api.js';
import type { LiveRouteName } from './live-api.js';
import { AggregatorRegistry } from 'prom-client';
import { assertValid, compile } from '../../bus/validation.js';
import { safeEqual } from '../../lib/crypto/tokens.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { describeProcesses } from '../../lib/runtime/presence.js';
import type { Peers } from '../../lib/runtime/peers.js';
import type { Logger } from '../../lib/runtime/log.js';
import type { ConsoleSessions } from './console-session.js';
import { missingRoles } from '../http/health.js';
import { BUS_ROLES } from '../../bus/permissions.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, RequestHead } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import { parseStateLines, stateLine } from './state-file.js';

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
  /** The console's sessions (console-api.ts): a signed-in console may call the admin API too. */
  sessions?: ConsoleSessions;
}

const installSchema = compile({
  $$strict: true,
  user: { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } },
  manifest: { type: 'string', min: 1 },
  providers: { type: 'array', optional: true, items: 'string' },
  host: { type: 'string', optional: true, min: 1, max: 253 },
  credentials: { type: 'object', optional: true, strict: true, props: credentialsSchema },
  // `pier app install --shared-dest`: this app and the user's apps whose upload folders nest with it trust each other.
  sharedDest: { type: 'boolean', optional: true },
});

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

function pathName(req: HttpRequestData, key: string, pattern: RegExp, what: string): string {
  const v = req.params[key];
  if (!pattern.test(v)) throw new PierError('BAD_REQUEST', `${what}: ${pattern === USER_NAME ? USER_NAME_RULE : APP_NAME_RULE}`);
  return v;
}

/**
 * The user's folder for the app's uploads, created by the upload role (the one that has the
 * storage) and named so the operator can mount it into the app. The install has happened
 * whatever this answers: with no upload role reachable the folder is created at the first upload,
 * and the answer says why it could not name it now.
 */
async function uploadDir(deps: AdminDeps, user: string, dest: string | null): Promise<{ dir: string | null; error?: string }> {
  if (dest === null) return { dir: null };
  try {
    return { dir: (await ask(deps.bus, upload.prepare, { user, dest })).dir };
  } catch (err) {
    return { dir: null, error: `the upload role did not create the folder: ${(err as Error).message}` };
  }
}

const EXPORT_PAGE = 500;

/**
 * An operation on versions goes on their own subject, which only vault replicas that speak wire
 * format 2 serve (docs/operations.md "Upgrading"): whatever a heartbeat claims, no 0.2 replica is
 * handed one. With no such replica running, nothing answers: said by name, not as a missing vault.
 */
async function askVersions(deps: AdminDeps, request: OperatorVaultRequest) {
  try {
    return await ask(deps.bus, vault.versions, request, { wire: OPERATOR_VERSIONS_WIRE });
  } catch (err) {
    if (!(err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS))) throw err;
    // Heartbeats only choose the words here, never whether the operation is sent.
    const heard = deps.peers.alive('vault').length;
    if (heard === 0) throw err;
    const message = `vault ${request.op} needs a vault replica of this release (wire format ${OPERATOR_VERSIONS_WIRE}), and none is running: the vault replicas running are of an earlier release; finish the upgrade (docs/operations.md "Upgrading")`;
    throw new PierError('UNAVAILABLE', message, { cause: err, reason: ErrorReasons.UNSUPPORTED_VERSION });
  }
}

/** `pier vault rekey` goes on its own subject, served by vault replicas of wire format 3 only: as `askVersions`. */
async function askRekey(deps: AdminDeps, request: RekeyRequest): Promise<RekeyAnswer> {
  try {
    return await ask(deps.bus, vault.rekey, request, { wire: REKEY_WIRE });
  } catch (err) {
    if (!(err instanceof PierError && err.is(ErrorReasons.NO_RESPONDERS)) || deps.peers.alive('vault').length === 0) throw err;
    const message = `vault rekey needs a vault replica of this release (wire format ${REKEY_WIRE}), and none is running: the vault replicas running are of an earlier release; finish the upgrade (docs/operations.md "Upgrading")`;
    throw new PierError('UNAVAILABLE', message, { cause: err, reason: ErrorReasons.UNSUPPORTED_VERSION });
  }
}

/** A reply that is not the envelope around a declared answer (an NDJSON stream, an envelope with flags beside `data`). */
export class RawReply {
  constructor(readonly reply: HttpReply) {}
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

/** Every admin route but those of live-api.ts, typed; edge/routes.ts mounts them from ADMIN_API. */
export function adminAnswers(deps: AdminDeps): AnswerHandlers<Exclude<AdminRouteName, LiveRouteName>> {
  const vaultOp = async <Op extends OperatorVaultRequest['op']>(op: Op, req: HttpRequestData): Promise<OperatorVaultAnswers[Op]> => {
    const q = (k: string) => req.query.get(k) ?? undefined;
    const withBody = op === 'set' || op === 'restore' || (op === 'destroy' && req.body.length > 0);
    const body = withBody ? (parseJsonBody(req) as { value?: unknown; version?: unknown }) : {};
    if (op === 'set' && typeof body.value !== 'string') throw new PierError('BAD_REQUEST', 'value: must be a string');
    const version = body.version;
    if ((op === 'restore' || version !== undefined) && !(typeof version === 'number' && Number.isSafeInteger(version) && version >= 1)) {
      throw new PierError('BAD_REQUEST', 'version: must be a whole number from 1');
    }
    const name = req.params.name ?? q('name');
    const request = {
      op,
      user: q('user') ?? '',
      workspace: q('workspace') ?? '',
      ...(q('env') ? { env: q('env') } : {}),
      ...(name ? { name } : {}),
      ...(op === 'set' ? { value: body.value as string } : {}),
      ...(typeof version === 'number' ? { version } : {}),
      ...(op === 'versions' && q('deleted') === 'true' ? { deleted: true } : {}),
    };
    // The vault answers the shape of the operation asked (bus/subjects-vault.ts OperatorVaultAnswers).
    if (!isOperatorVersionOp(op)) return (await ask(deps.bus, vault.operator, request)).data as OperatorVaultAnswers[Op];
    return (await askVersions(deps, request)).data as OperatorVaultAnswers[Op];
  };
  const setState = (state: ProviderState) => async (req: HttpRequestData) => providerRow(await ask(deps.bus, registry.providerSetState, { name: req.params.name, state }));

  return {
    userAdd: async (req) => {
      const body = parseJsonBody(req);
      return ask(deps.bus, registry.userAdd, { name: body.name as string });
    },
    userList: async () => (await ask(deps.bus, registry.userList, {})).map((u) => ({ name: u.name, tokens: u.tokens, createdAt: u.createdAt })),
    userToken: async (req) => ask(deps.bus, registry.userToken, { name: pathName(req, 'name', USER_NAME, 'user') }),
    userRevoke: async (req) => ask(deps.bus, registry.userRevoke, { name: pathName(req, 'name', USER_NAME, 'user') }),

    appInstall: async (req) => {
      const body = parseJsonBody(req);
      assertValid(installSchema, body);
      const installed = await ask(deps.bus, registry.appInstall, {
        user: body.user as string,
        manifest: body.manifest as string,
        providers: (body.providers as string[] | undefined) ?? [],
        host: (body.host as string | undefined) ?? '127.0.0.1',
        ...(body.credentials === undefined ? {} : { credentials: body.credentials as ImportedCredentials }),
        ...(body.sharedDest === true ? { sharedDest: true } : {}),
      });
      const folder = await uploadDir(deps, installed.user, installed.uploadDest);
      return {
        app: installed.app,
        user: installed.user,
        env: { OS_SYSTEM_SERVER: deps.systemServer(), OS_APP_KEY: installed.appKey, OS_APP_SECRET: installed.appSecret },
        uploadDir: folder.dir,
        ...(folder.error === undefined ? {} : { uploadDirError: folder.error }),
      };
    },
    appList: async (req) => {
      const user = req.query.get('user') ?? undefined;
      if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: ${USER_NAME_RULE}`);
      // With what the registry's caches know of each app: its grants and its upload folder (the console's apps view).
      const apps = await ask(deps.bus, registry.appList, user === undefined ? {} : { user });
      return apps.map((a): AppRow => {
        const row: AppRow = { user: a.user, app: a.app, version: a.version, host: a.host, appKey: a.appKey, providers: a.providers, installedAt: a.installedAt, sharedDest: a.sharedDest };
        const view = deps.cache.app(a.user, a.app);
        if (!view) return row;
        const dest = view.upload?.dest ?? null;
        return { ...row, grants: view.grants.map((g) => ({ dataType: g.dataType, group: g.group, version: g.version, ops: g.ops })), uploadDest: dest, upload_dest: dest };
      });
    },
    appUninstall: async (req) => {
      const purge = req.query.get('purge');
      if (purge !== null && purge !== 'true' && purge !== 'false') throw new PierError('BAD_REQUEST', 'purge: must be true or false');
      const user = pathName(req, 'user', USER_NAME, 'user');
      const app = pathName(req, 'app', APP_NAME, 'app');
      return ask(deps.bus, registry.appUninstall, { user, app, purge: purge === 'true' }).catch((err: unknown) => {
        // Purging an app already uninstalled: its grants went with it, but its workspaces can still go.
        if (err instanceof PierError && err.is(ErrorReasons.APP_UNKNOWN) && purge === 'true') {
          throw new PierError('NOT_FOUND', `${err.message}: to delete the secrets a plain uninstall kept, run pier vault purge --user ${user} --workspace W for each of its workspaces`);
        }
        throw err;
      });
    },

    providerList: async () => (await ask(deps.bus, registry.providerList, {})).map(providerRow),
    providerSuspend: setState('suspended'),
    providerResume: setState('active'),

    vaultAudit: async (req) => {
      const user = req.query.get('user') ?? undefined;
      if (user !== undefined && !USER_NAME.test(user)) throw new PierError('BAD_REQUEST', `user: ${USER_NAME_RULE}`);
      const limitText = req.query.get('limit') ?? '100';
      if (!/^\d{1,6}$/.test(limitText) || Number(limitText) < 1) throw new PierError('BAD_REQUEST', 'limit: must be an integer from 1 to 100000');
      // `app` and `op` narrow the search (the console's filters; `pier vault audit --app --op`): the
      // vault searches back until `limit` entries match, through AUDIT_SCAN_MAX entries at most.
      const app = req.query.get('app') ?? undefined;
      const op = req.query.get('op') ?? undefined;
      if (app !== undefined && app !== OPERATOR_IN_AUDIT && !APP_NAME.test(app)) throw new PierError('BAD_REQUEST', `app: ${APP_NAME_RULE}, or ${OPERATOR_IN_AUDIT}`);
      if (op !== undefined && !/^[A-Za-z]{1,64}$/.test(op)) throw new PierError('BAD_REQUEST', 'op: must be an operation name, letters only');
      const query: AuditQuery = { ...(user === undefined ? {} : { user }), ...(app === undefined ? {} : { app }), ...(op === undefined ? {} : { op }), limit: Math.min(100_000, Number(limitText)) };
      const page = await ask(deps.bus, vault.audit, query);
      const rows: AuditRow[] = page.entries.map((e) => ({ at: e.at, user: e.user, app: e.app, op: e.op, workspace: e.workspace, env: e.env, name: e.name, outcome: e.outcome }));
      if (page.complete) return rows;
      // Fewer matches than asked, and older entries not searched: said beside `data` (docs/protocol.md "Admin API").
      return new RawReply({ status: 200, json: { code: 0, message: 'success', data: rows, searched: { entries: page.scanned, backTo: page.searchedBackTo, complete: false } } });
    },
    // `pier vault list|get|set|delete|purge`: one user's workspace, as the operator. The target in
    // the query (`user`, `workspace`, `env`), the name in the path or the query; a value only in a PUT body.
    vaultList: (req) => vaultOp('list', req),
    vaultPurge: (req) => vaultOp('purge', req),
    vaultGetByPath: (req) => vaultOp('get', req),
    vaultSetByPath: (req) => vaultOp('set', req),
    vaultDeleteByPath: (req) => vaultOp('delete', req),
    vaultGet: (req) => vaultOp('get', req),
    vaultSet: (req) => vaultOp('set', req),
    vaultDelete: (req) => vaultOp('delete', req),
    vaultVersions: (req) => vaultOp('versions', req),
    vaultDeleted: (req) => vaultOp('deleted', req),
    vaultRestore: (req) => vaultOp('restore', req),
    vaultUndelete: (req) => vaultOp('undelete', req),
    vaultDestroy: (req) => vaultOp('destroy', req),
    vaultFormats: () => askRekey(deps, { status: true }),
    vaultRekey: (req) => {
      const body = req.body.length > 0 ? (parseJsonBody(req) as { limit?: unknown }) : {};
      if (body.limit !== undefined && !(typeof body.limit === 'number' && Number.isSafeInteger(body.limit) && body.limit >= 1 && body.limit <= 1_000_000)) {
        throw new PierError('BAD_REQUEST', 'limit: must be a whole number from 1 to 1000000');
      }
      return askRekey(deps, body.limit === undefined ? {} : { limit: body.limit });
    },

    /** `pier state export`: every record of the registry and the vault, as NDJSON, streamed page by page. */
    stateExport: async () => {
      async function* lines(): AsyncGenerator<Uint8Array> {
        for (const ep of [stateEndpoints.registryExport, stateEndpoints.vaultExport]) {
          for (let offset = 0; ; offset += EXPORT_PAGE) {
            const page = await ask(deps.bus, ep, { offset, limit: EXPORT_PAGE });
            yield Buffer.from(page.records.map(stateLine).join(''));
            if (page.done) break;
          }
        }
      }
      return new RawReply({ status: 200, headers: { 'content-type': 'application/x-ndjson' }, stream: lines() });
    },
    /**
     * `pier state import`: one batch of records (NDJSON, within the admin body limit). The first
     * batch (`?first=true`) is refused unless the registry and the vault are empty.
     */
    stateImport: async (req) => {
      const records = parseStateLines(req.body.toString('utf8'), Number(req.query.get('line') ?? '1') || 1);
      if (req.query.get('first') === 'true') {
        const [r, v] = await Promise.all([ask(deps.bus, stateEndpoints.registryEmpty, {}), ask(deps.bus, stateEndpoints.vaultEmpty, {})]);
        if (!r.empty || !v.empty) throw new PierError('CONFLICT', 'the target already holds state: import goes into an empty registry and vault');
      }
      const registryKinds = new Set(['user', 'token', 'app', 'provider']);
      let imported = 0;
      for (let i = 0; i < records.length; i += 1_000) {
        const chunk = records.slice(i, i + 1_000);
        const reg = chunk.filter((r) => registryKinds.has(r.kind));
        const vlt = chunk.filter((r) => !registryKinds.has(r.kind));
        if (reg.length > 0) imported += (await ask(deps.bus, stateEndpoints.registryImport, { records: reg })).imported;
        if (vlt.length > 0) imported += (await ask(deps.bus, stateEndpoints.vaultImport, { records: vlt })).imported;
      }
      return { imported };
    },
    /** After restarting every process with the new PIER_MASTER_KEY and the old one as PIER_MASTER_KEY_PREVIOUS. */
    rotateMasterKey: async () => {
      const { rewrapped } = await ask(deps.bus, vault.rotate, {});
      const { resealed } = await ask(deps.bus, registry.appReseal, {});
      return { rewrappedDataKeys: rewrapped, resealedAppSecrets: resealed, rewrapped_data_keys: rewrapped, resealed_app_secrets: resealed };
    },

    status: async () => {
      const reports = await describeProcesses(deps.bus, 300, deps.peers);
      const sum = (key: string) => reports.reduce((n, r) => n + (r.counters[key] ?? 0), 0);
      const missing = missingRoles(deps.peers);
      return {
        // Roles with a live process: the heartbeats' word (as `missingRoles`), and any a report names.
        roles: [...new Set([...BUS_ROLES.filter((role) => !missing.includes(role)), ...reports.flatMap((r) => r.info.roles)])].sort(),
        mismatched: deps.peers.mismatched().map((p) => ({ id: p.id, roles: p.roles, version: p.version ?? null, wire: p.wire ?? FIRST_WIRE })),
        wire: { speaks: WIRE_VERSION, oldest: OLDEST_WIRE_VERSION },
        missingRoles: missing,
        missing_roles: missing,
        bus: { kind: deps.bus.kind, connected: deps.bus.isConnected() },
        registry: { revision: deps.cache.currentRevision(), fresh: deps.cache.isFresh() },
        // Each process as it announces itself, with its actor endpoints' figures (requests, errors, time, last error).
        replicas: reports.map((r) => replicaRow(r.info, r.counters, r.endpoints)).sort((a, b) => a.id.localeCompare(b.id)),
        connections: sum('connections'),
        uploads: sum('uploads'),
      };
    },
  };
}

function providerRow(p: ProviderView): ProviderRow {
  return {
    name: p.name,
    user: p.user,
    app: p.app,
    namespace: p.namespace,
    version: p.version,
    dataType: p.dataType,
    group: p.group,
    endpoint: p.endpoint,
    deployment: p.deployment,
    description: p.description,
    opApis: p.opApis.map((o) => ({ name: o.name, uri: o.uri })),
    state: p.state,
    appliedAt: p.appliedAt,
  };
}

function replicaRow(info: ProcessInfo, counters: Record<string, number>, endpoints: Record<string, EndpointStats> | undefined): ReplicaRow {
  const row: ReplicaRow = { id: info.id, busId: info.busId, roles: info.roles, pid: info.pid, host: info.host, startedAt: info.startedAt, ...(info.version === undefined ? {} : { version: info.version }), wire: info.wire ?? FIRST_WIRE, counters };
  return endpoints && Object.keys(endpoints).length > 0 ? { ...row, endpoints } : row;
}

/** Prometheus text for every process on the bus, merged (each series keeps its `instance` label). */
export async function clusterMetrics(bus: Bus, peers: Pick<Peers, 'signedBy' | 'alive'>): Promise<HttpReply> {
  const reports = await describeProcesses(bus, 300, peers);
  const merged = AggregatorRegistry.aggregate(reports.map((r) => r.metrics) as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return { status: 200, text: await merged.metrics(), headers: { 'content-type': merged.contentType } };
}

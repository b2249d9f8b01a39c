import { randomBytes, randomUUID } from 'node:crypto';
import { accessSync, constants, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { availableParallelism, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { Keyring } from './keyring.js';
import { natsAuthFrom, stateLoginVariable, type NatsAuth } from './nats-auth.js';
import { STATE_ROLES } from '../bus/permissions.js';
import { loadCertificates, type TlsSettings } from './tls-files.js';
import { BUS_ROLES, type BusRole } from '../bus/permissions.js';

/** Roles a process can run: one bus identity each (bus/permissions.ts). */
export const ROLES = BUS_ROLES;
export type Role = BusRole;
/** Roles that seal, unseal or sign with the master key. */
export const KEYRING_ROLES: readonly Role[] = ['registry', 'token', 'provider', 'vault'];

export interface Ports {
  public: number;
  system: number;
  local: number;
  upload: number;
  admin: number;
}

/** The one configuration object, built and checked at start-up and passed down. */
export interface Config {
  instanceId: string;
  roles: Role[];
  dataDir: string;
  natsUrl: string | null;
  /** The NATS identity and TLS (NATS_CREDS or NATS_USER/NATS_PASSWORD, NATS_TLS_*). */
  natsAuth: NatsAuth;
  domain: string;
  /** Address the public, system, local and upload listeners bind; admin is always loopback. */
  bindHost: string;
  ports: Ports;
  /**
   * `OS_SYSTEM_SERVER` handed to apps at install: a bare `host:port` (the platform's apps build
   * `'http://' + OS_SYSTEM_SERVER`); null = `127.0.0.1:<system port in use>`.
   */
  systemServer: string | null;
  adminToken: string;
  /** The master key (and, during a rotation, the previous one). */
  keyring: Keyring;
  logLevel: string;
  /** `PIER_LOG_FORMAT`: `json` (one object per line, the default) or `pretty` (for a terminal). */
  logFormat: 'json' | 'pretty';
  limits: { adminBodyBytes: number };
  registry: { heartbeatMs: number; maxStalenessMs: number };
  /** Added to the system clock: for hosts whose clock is known to be off, and for tests. */
  clockOffsetMs: number;
  token: { windowMs: number; failuresPerKey: number; failuresPerClient: number; failureWindowMs: number; bcryptThreads: number };
  /** `networks`: CIDRs providers and gateway callbacks may be reached in (PIER_PROVIDER_NETWORKS); empty = anywhere but the always-refused ranges. */
  provider: { timeoutMs: number; bodyBytes: number; networks: string[] };
  /** The vault is the provider `secret` / `secret.<vaultName>` / `v1`. */
  vaultName: string;
  /** Audit retention: entries older than `maxAgeMs` go, and the oldest past `maxEntries`. */
  audit: { maxAgeMs: number; maxEntries: number };
  /** Process heartbeats, and how long a silent process counts as alive. */
  heartbeatMs: number;
  peerDeadMs: number;
  /** `PIER_PROBE_PORT`: /healthz, /readyz and /metrics of this process (any roles); null: none. */
  probePort: number | null;
  /** How long a stop (SIGTERM, SIGINT) waits for work in flight before leaving it (and saying so). */
  stopTimeoutMs: number;
  gateway: {
    idleMs: number;
    maxFrameBytes: number;
    outboundBufferBytes: number;
    callbackTimeoutMs: number;
    /** How long an undeliverable callback is retried before it is counted as dropped. */
    callbackRetryMs: number;
    /** Unsettled events one connection may have waiting for its app (4009 past either). */
    maxPendingEvents: number;
    maxPendingBytes: number;
    /** Live connections per user on one gateway (upgrade 429 past it). */
    maxConnsPerUser: number;
  };
  upload: {
    /** Users' files: `<root>/<user>/<dest>` (CONTRACT.md section 2). */
    root: string;
    chunkBytes: number;
    idleMs: number;
    maxUnfinished: number;
  };
  /** Where state lives (CONTRACT.md section 10): LMDB under the data dir, or JetStream with `replicas`. */
  state: { kind: 'lmdb' | 'jetstream'; replicas: number };
  /** TLS on the browser-facing listeners (CONTRACT.md section 11); null: plain. */
  tls: TlsSettings | null;
  /** Sidecar mode (`--app USER/APP`): the local listener serves this one app, on loopback, without headers. */
  sidecarApp: { user: string; app: string } | null;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Flags of `pier start`, by name, as given on the command line. */
export interface StartFlags {
  roles?: string;
  'data-dir'?: string;
  app?: string;
}

/** Every environment variable Pier reads, and nothing else reads the environment. */
export const ENV = {
  dataDir: 'PIER_DATA_DIR',
  roles: 'PIER_ROLES',
  natsUrl: 'NATS_URL',
  natsCreds: 'NATS_CREDS',
  domain: 'PIER_DOMAIN',
  bindHost: 'PIER_BIND_HOST',
  publicPort: 'PIER_PUBLIC_PORT',
  systemPort: 'PIER_SYSTEM_PORT',
  localPort: 'PIER_LOCAL_PORT',
  uploadPort: 'PIER_UPLOAD_PORT',
  adminPort: 'PIER_ADMIN_PORT',
  systemServerUrl: 'PIER_SYSTEM_URL',
  adminToken: 'PIER_ADMIN_TOKEN',
  masterKey: 'PIER_MASTER_KEY',
  previousMasterKey: 'PIER_MASTER_KEY_PREVIOUS',
  logLevel: 'PIER_LOG_LEVEL',
  logFormat: 'PIER_LOG_FORMAT',
  adminBodyBytes: 'PIER_ADMIN_BODY_BYTES',
  registryHeartbeatMs: 'PIER_REGISTRY_HEARTBEAT_MS',
  registryMaxStalenessMs: 'PIER_REGISTRY_MAX_STALENESS_MS',
  clockOffsetMs: 'PIER_CLOCK_OFFSET_MS',
  tokenWindowMs: 'PIER_TOKEN_WINDOW_MS',
  tokenFailuresPerKey: 'PIER_TOKEN_FAILURES_PER_KEY',
  tokenFailuresPerClient: 'PIER_TOKEN_FAILURES_PER_CLIENT',
  tokenFailureWindowMs: 'PIER_TOKEN_FAILURE_WINDOW_MS',
  bcryptThreads: 'PIER_BCRYPT_THREADS',
  providerTimeoutMs: 'PIER_PROVIDER_TIMEOUT_MS',
  providerBodyBytes: 'PIER_PROVIDER_BODY_BYTES',
  providerNetworks: 'PIER_PROVIDER_NETWORKS',
  vaultName: 'PIER_VAULT_NAME',
  auditRetentionDays: 'PIER_AUDIT_RETENTION_DAYS',
  auditMaxEntries: 'PIER_AUDIT_MAX_ENTRIES',
  heartbeatMs: 'PIER_HEARTBEAT_MS',
  peerDeadMs: 'PIER_PEER_DEAD_MS',
  stopTimeoutMs: 'PIER_STOP_TIMEOUT_MS',
  probePort: 'PIER_PROBE_PORT',
  wsIdleMs: 'PIER_WS_IDLE_MS',
  wsMaxFrameBytes: 'PIER_WS_MAX_FRAME_BYTES',
  wsOutboundBytes: 'PIER_WS_OUTBOUND_BUFFER_BYTES',
  callbackTimeoutMs: 'PIER_CALLBACK_TIMEOUT_MS',
  callbackRetryMs: 'PIER_CALLBACK_RETRY_MS',
  wsPendingEvents: 'PIER_WS_PENDING_EVENTS',
  wsPendingBytes: 'PIER_WS_PENDING_BYTES',
  wsConnsPerUser: 'PIER_WS_CONNS_PER_USER',
  uploadChunkBytes: 'PIER_UPLOAD_CHUNK_BYTES',
  uploadIdleMs: 'PIER_UPLOAD_IDLE_MS',
  uploadMaxUnfinished: 'PIER_UPLOAD_MAX_UNFINISHED',
  uploadRoot: 'PIER_UPLOAD_ROOT',
  state: 'PIER_STATE',
  jsReplicas: 'PIER_JS_REPLICAS',
  tlsCert: 'PIER_TLS_CERT',
  tlsKey: 'PIER_TLS_KEY',
  tlsSniDir: 'PIER_TLS_SNI_DIR',
  tlsListeners: 'PIER_TLS_LISTENERS',
} as const;

export const DEFAULT_PORTS: Ports = { public: 8080, system: 40080, local: 40010, upload: 40030, admin: 40090 };

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got "${raw}"`);
  return Number(raw);
}

function parseRoles(raw: string | undefined, source: string): Role[] {
  if (raw === undefined || raw === '' || raw === 'all') return [...ROLES];
  const roles = raw.split(',').map((r) => r.trim()).filter(Boolean);
  for (const r of roles) {
    if (!(ROLES as readonly string[]).includes(r)) throw new ConfigError(`${source}: unknown role "${r}" (roles: ${ROLES.join(', ')})`);
  }
  return [...new Set(roles)] as Role[];
}

function ensureWritableDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    accessSync(dir, constants.W_OK | constants.R_OK);
  } catch (err) {
    throw new ConfigError(`${ENV.dataDir}: ${dir} is not a writable directory (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/**
 * A secret given in the environment, or else read from (or created in) a 0600 file in the data
 * dir. Creation uses O_EXCL, so processes starting together on one data dir agree on one value.
 */
function secretFile(path: string, make: () => string): string {
  try {
    writeFileSync(path, make(), { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new ConfigError(`cannot create ${path}: ${(err as Error).message}`);
  }
  const value = readFileSync(path, 'utf8').trim();
  if (value === '') throw new ConfigError(`${path} is empty: delete it to have a new one generated`);
  return value;
}

/**
 * `PIER_SYSTEM_URL` as the bare `host:port` apps get in `OS_SYSTEM_SERVER`. Operators often write a
 * URL: an `http://` or `https://` scheme and a trailing slash are dropped rather than refused.
 */
export function normaliseSystemServer(raw: string): string {
  const bare = raw.trim().replace(/^https?:\/\//i, '').replace(/\/+$/, '');
  if (!/^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/.test(bare) || Number(bare.split(':').at(-1)) > 65535) {
    throw new ConfigError(`${ENV.systemServerUrl}: must be host:port (apps build http://<host:port>), got "${raw}"`);
  }
  return bare;
}

/** A comma-separated list of CIDRs (`10.0.0.0/8,fd00::/8`), each checked. */
function parseCidrs(text: string): string[] {
  const entries = text.split(',').map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    const m = /^([^/]+)\/(\d{1,3})$/.exec(entry);
    const family = m ? isIP(m[1]) : 0;
    if (!m || family === 0 || Number(m[2]) > (family === 4 ? 32 : 128)) throw new ConfigError(`${ENV.providerNetworks}: "${entry}" is not a CIDR (like 10.0.0.0/8 or fd00::/8)`);
  }
  return entries;
}

function parseLogFormat(text: string | undefined): Config['logFormat'] {
  if (text === undefined || text === '' || text === 'json') return 'json';
  if (text === 'pretty') return 'pretty';
  throw new ConfigError(`${ENV.logFormat}: must be json or pretty, got "${text}"`);
}

function parseState(env: Env, natsUrl: string | null): Config['state'] {
  const kind = env[ENV.state] || 'lmdb';
  if (kind !== 'lmdb' && kind !== 'jetstream') throw new ConfigError(`${ENV.state}: must be lmdb or jetstream, got "${kind}"`);
  if (kind === 'jetstream' && !natsUrl) throw new ConfigError(`${ENV.state}=jetstream: needs ${ENV.natsUrl} (a JetStream-enabled NATS cluster)`);
  const replicas = integer(env, ENV.jsReplicas, 3, 1, 5);
  if (replicas % 2 === 0) throw new ConfigError(`${ENV.jsReplicas}: must be 1, 3 or 5 (a quorum needs an odd number), got ${replicas}`);
  return { kind, replicas };
}

/**
 * With an authenticated bus, each role that keeps state on JetStream reaches it through its own
 * account (CONTRACT.md section 9): its identity must carry that login, or the start stops here
 * rather than at the first write.
 */
function checkStateLogins(state: Config['state'], roles: Role[], auth: NatsAuth, credsFile: string | undefined): Config['state'] {
  if (state.kind !== 'jetstream' || auth.user === null) return state;
  for (const role of roles.filter((r) => STATE_ROLES.includes(r))) {
    if (auth.state[role]) continue;
    const where = credsFile ? `${credsFile} has no ${stateLoginVariable(role)} line` : `${stateLoginVariable(role)} is not set`;
    throw new ConfigError(`${ENV.state}=jetstream: role ${role} keeps its state in its own NATS account, but ${where}: use the credentials of a current \`pier bus init\` (docs/security.md, "Upgrading")`);
  }
  return state;
}

/** TLS settings, with every file checked now: a bad or missing one stops the start with one line. */
function parseTls(env: Env, roles: Role[]): TlsSettings | null {
  const cert = env[ENV.tlsCert];
  const key = env[ENV.tlsKey];
  const sniDir = env[ENV.tlsSniDir] || null;
  if (!cert && !key) {
    if (sniDir || env[ENV.tlsListeners]) throw new ConfigError(`${ENV.tlsCert} and ${ENV.tlsKey}: required with ${sniDir ? ENV.tlsSniDir : ENV.tlsListeners}`);
    return null;
  }
  if (!cert || !key) throw new ConfigError(`${ENV.tlsCert} and ${ENV.tlsKey} go together`);
  const listeners = (env[ENV.tlsListeners] || 'public,upload').split(',').map((l) => l.trim()).filter(Boolean);
  for (const l of listeners) {
    if (!['public', 'system', 'local', 'upload'].includes(l)) throw new ConfigError(`${ENV.tlsListeners}: "${l}" is not a listener with TLS (public, system, local, upload)`);
  }
  const settings: TlsSettings = { cert: resolve(cert), key: resolve(key), sniDir: sniDir ? resolve(sniDir) : null, listeners: [...new Set(listeners)] };
  // Only a process that listens needs the files.
  if (roles.includes('edge')) {
    try {
      loadCertificates(settings);
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
  }
  return settings;
}

function parseMasterKey(text: string, source: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new ConfigError(`${source}: must be 32 bytes, as 64 hex digits or base64`);
  return key;
}

export function loadConfig(env: Env, flags: StartFlags = {}): Config {
  const dataDir = resolve(flags['data-dir'] ?? env[ENV.dataDir] ?? './data');
  const natsUrl = env[ENV.natsUrl] || null;
  const roles = flags.roles !== undefined ? parseRoles(flags.roles, '--roles') : parseRoles(env[ENV.roles], ENV.roles);
  if (roles.length === 0) throw new ConfigError('--roles: give at least one role');
  if (!natsUrl && roles.length !== ROLES.length) {
    throw new ConfigError(`--roles ${roles.join(',')}: running a subset of roles needs ${ENV.natsUrl} (the in-process bus only joins roles inside one process)`);
  }
  let natsAuth: NatsAuth;
  try {
    natsAuth = natsAuthFrom(env);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  if (natsUrl && !/^(nats|tls|ws|wss):\/\/[^\s]+$/.test(natsUrl.split(',')[0])) throw new ConfigError(`${ENV.natsUrl}: must look like nats://host:4222, got "${natsUrl}"`);

  const ports: Ports = {
    public: integer(env, ENV.publicPort, DEFAULT_PORTS.public, 0, 65535),
    system: integer(env, ENV.systemPort, DEFAULT_PORTS.system, 0, 65535),
    local: integer(env, ENV.localPort, DEFAULT_PORTS.local, 0, 65535),
    upload: integer(env, ENV.uploadPort, DEFAULT_PORTS.upload, 0, 65535),
    admin: integer(env, ENV.adminPort, DEFAULT_PORTS.admin, 0, 65535),
  };
  const domain = env[ENV.domain] || 'localhost';
  if (!/^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(domain)) throw new ConfigError(`${ENV.domain}: "${domain}" is not a domain name`);

  const vaultName = env[ENV.vaultName] || 'vault';
  if (!/^[a-z][a-z0-9-]{0,62}$/.test(vaultName)) throw new ConfigError(`${ENV.vaultName}: must match ^[a-z][a-z0-9-]{0,62}$, got "${vaultName}"`);

  let sidecarApp: Config['sidecarApp'] = null;
  if (flags.app !== undefined) {
    const m = /^([a-z][a-z0-9-]{0,30})\/([a-z][a-z0-9]{0,30})$/.exec(flags.app);
    if (!m) throw new ConfigError(`--app: must be USER/APP, got "${flags.app}"`);
    sidecarApp = { user: m[1], app: m[2] };
  }

  ensureWritableDir(dataDir);
  // A secret is kept (and generated into the data dir) only by the roles that use it: an edge has
  // no admin token and no master key (CONTRACT.md section 9). The others get a throwaway one.
  const uses = (needed: readonly Role[]) => roles.some((r) => needed.includes(r));
  const adminToken = env[ENV.adminToken] || (uses(['admin']) ? secretFile(join(dataDir, 'admin.token'), () => randomBytes(32).toString('base64url')) : randomBytes(32).toString('base64url'));
  if (adminToken.length < 16) throw new ConfigError(`${ENV.adminToken}: must be at least 16 characters`);
  const masterKeyText =
    env[ENV.masterKey] || (uses(KEYRING_ROLES) ? secretFile(join(dataDir, 'master.key'), () => randomBytes(32).toString('base64')) : randomBytes(32).toString('base64'));
  const masterKey = parseMasterKey(masterKeyText, env[ENV.masterKey] ? ENV.masterKey : join(dataDir, 'master.key'));
  const previousKey = env[ENV.previousMasterKey] ? parseMasterKey(env[ENV.previousMasterKey]!, ENV.previousMasterKey) : null;

  const heartbeatMs = integer(env, ENV.registryHeartbeatMs, 500, 50, 60_000);
  return {
    instanceId: `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
    roles,
    dataDir,
    natsUrl,
    natsAuth,
    domain,
    bindHost: env[ENV.bindHost] || '0.0.0.0',
    ports,
    systemServer: env[ENV.systemServerUrl] ? normaliseSystemServer(env[ENV.systemServerUrl]!) : null,
    adminToken,
    keyring: new Keyring(masterKey, previousKey),
    logLevel: env[ENV.logLevel] || 'info',
    logFormat: parseLogFormat(env[ENV.logFormat]),
    limits: { adminBodyBytes: integer(env, ENV.adminBodyBytes, 1024 * 1024, 1024, 64 * 1024 * 1024) },
    registry: { heartbeatMs, maxStalenessMs: integer(env, ENV.registryMaxStalenessMs, Math.max(5_000, heartbeatMs * 10), 100, 3_600_000) },
    clockOffsetMs: integer(env, ENV.clockOffsetMs, 0, -10 * 365 * 86_400_000, 10 * 365 * 86_400_000),
    token: {
      windowMs: integer(env, ENV.tokenWindowMs, 30_000, 1_000, 3_600_000),
      failuresPerKey: integer(env, ENV.tokenFailuresPerKey, 10, 1, 1_000_000),
      failuresPerClient: integer(env, ENV.tokenFailuresPerClient, 50, 1, 1_000_000),
      failureWindowMs: integer(env, ENV.tokenFailureWindowMs, 60_000, 1_000, 86_400_000),
      // One core stays free for the event loops: a flood of proofs must not stall every other request.
      bcryptThreads: integer(env, ENV.bcryptThreads, Math.max(1, availableParallelism() - 1), 1, 256),
    },
    provider: {
      timeoutMs: integer(env, ENV.providerTimeoutMs, 30_000, 100, 3_600_000),
      bodyBytes: integer(env, ENV.providerBodyBytes, 8 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      networks: parseCidrs(env[ENV.providerNetworks] ?? ''),
    },
    vaultName,
    audit: {
      maxAgeMs: integer(env, ENV.auditRetentionDays, 90, 1, 36_500) * 86_400_000,
      maxEntries: integer(env, ENV.auditMaxEntries, 1_000_000, 1_000, 1_000_000_000),
    },
    heartbeatMs: integer(env, ENV.heartbeatMs, 1_000, 50, 60_000),
    stopTimeoutMs: integer(env, ENV.stopTimeoutMs, 8_000, 100, 600_000),
    probePort: env[ENV.probePort] ? integer(env, ENV.probePort, 0, 0, 65535) : null,
    peerDeadMs: integer(env, ENV.peerDeadMs, 10_000, 200, 600_000),
    gateway: {
      idleMs: integer(env, ENV.wsIdleMs, 45_000, 100, 3_600_000),
      maxFrameBytes: integer(env, ENV.wsMaxFrameBytes, 64 * 1024, 1024, 16 * 1024 * 1024),
      outboundBufferBytes: integer(env, ENV.wsOutboundBytes, 1024 * 1024, 1024, 256 * 1024 * 1024),
      callbackTimeoutMs: integer(env, ENV.callbackTimeoutMs, 5_000, 100, 600_000),
      callbackRetryMs: integer(env, ENV.callbackRetryMs, 60_000, 100, 86_400_000),
      maxPendingEvents: integer(env, ENV.wsPendingEvents, 1_000, 1, 1_000_000),
      maxPendingBytes: integer(env, ENV.wsPendingBytes, 1024 * 1024, 1024, 1024 * 1024 * 1024),
      maxConnsPerUser: integer(env, ENV.wsConnsPerUser, 256, 1, 1_000_000),
    },
    upload: {
      root: resolve(env[ENV.uploadRoot] || join(dataDir, 'files')),
      chunkBytes: integer(env, ENV.uploadChunkBytes, 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      idleMs: integer(env, ENV.uploadIdleMs, 24 * 3_600_000, 1_000, 365 * 86_400_000),
      maxUnfinished: integer(env, ENV.uploadMaxUnfinished, 100, 1, 1_000_000),
    },
    state: checkStateLogins(parseState(env, natsUrl), roles, natsAuth, env[ENV.natsCreds]),
    tls: parseTls(env, roles),
    sidecarApp,
  };
}

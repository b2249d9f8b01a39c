import { parseTracing } from '../trace/config.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { availableParallelism, hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { ENV, integer, type Env } from './config-env.js';
import { checkStateLogins, normaliseSystemServer, parseHistory, parseAdminHosts, parseCidrs, parseLogFormat, parseRoles, parseState, parseTls } from './config-sections.js';
import { ensureWritableDir, parseMasterKey, secretFile } from './config-secrets.js';
import { ConfigError } from './config-error.js';
import { DEFAULT_PORTS, KEYRING_ROLES, ROLES, type Config, type Ports, type Role, type StartFlags } from './config-types.js';
import { Keyring } from '../crypto/keyring.js';
import { natsAuthFrom, type NatsAuth } from './nats-auth.js';
import { busTrustFrom } from './config-trust.js';

// The configuration's one entry point: `loadConfig` builds the Config from the environment and the
// flags. The pieces live beside it (types, the env map, section readers, secrets); what other code
// imports from here is re-exported, so callers keep one import.
export { ConfigError, DEFAULT_PORTS, ENV, KEYRING_ROLES, normaliseSystemServer, ROLES };
export type { Config, Ports, Role, StartFlags };

/** The Config from `env` and the flags of `pier start`, every value checked: a bad one is a ConfigError naming it. */
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
  const natsMonitorUrl = env[ENV.natsMonitorUrl] || null;
  if (natsMonitorUrl && !/^https?:\/\/[^\s/]+\/?$/.test(natsMonitorUrl)) throw new ConfigError(`${ENV.natsMonitorUrl}: must look like http://host:8222 (nats-server's monitoring port), got "${natsMonitorUrl.slice(0, 100)}"`);

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
  // no admin token and no master key (docs/security.md "The bus"). The others get a throwaway one.
  const uses = (needed: readonly Role[]) => roles.some((r) => needed.includes(r));
  const adminToken = env[ENV.adminToken] || (uses(['admin']) ? secretFile(join(dataDir, 'admin.token'), () => randomBytes(32).toString('base64url')) : randomBytes(32).toString('base64url'));
  if (adminToken.length < 16) throw new ConfigError(`${ENV.adminToken}: must be at least 16 characters`);
  const masterKeyText =
    env[ENV.masterKey] || (uses(KEYRING_ROLES) ? secretFile(join(dataDir, 'master.key'), () => randomBytes(32).toString('base64')) : randomBytes(32).toString('base64'));
  const masterKey = parseMasterKey(masterKeyText, env[ENV.masterKey] ? ENV.masterKey : join(dataDir, 'master.key'));
  const previousKey = env[ENV.previousMasterKey] ? parseMasterKey(env[ENV.previousMasterKey]!, ENV.previousMasterKey) : null;
  const keyring = new Keyring(masterKey, previousKey);
  // The throwaway key of a process without one is no anchor: only a given or kept master key is.
  const busTrust = busTrustFrom(env, roles, keyring, Boolean(env[ENV.masterKey]) || uses(KEYRING_ROLES), natsUrl !== null);

  const heartbeatMs = integer(env, ENV.registryHeartbeatMs, 500, 50, 60_000);
  const stopTimeoutMs = integer(env, ENV.stopTimeoutMs, 8_000, 100, 600_000);
  const drainMs = integer(env, ENV.drainMs, 0, 0, 300_000);
  // The drain is part of the stop: the stop's bound must leave room for the rest of it.
  if (drainMs > 0 && drainMs >= stopTimeoutMs) throw new ConfigError(`${ENV.drainMs}: must be less than ${ENV.stopTimeoutMs} (${stopTimeoutMs}), which bounds the whole stop`);
  return {
    instanceId: `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
    roles,
    dataDir,
    natsUrl,
    natsAuth,
    natsMonitorUrl: natsMonitorUrl?.replace(/\/$/, '') ?? null,
    domain,
    bindHost: env[ENV.bindHost] || '0.0.0.0',
    ports,
    systemServer: env[ENV.systemServerUrl] ? normaliseSystemServer(env[ENV.systemServerUrl]!) : null,
    adminToken,
    keyring,
    busTrust,
    freezeShared: env[ENV.freezeShared] === '1',
    adminHosts: parseAdminHosts(env[ENV.adminHosts]),
    logLevel: env[ENV.logLevel] || 'info',
    logFormat: parseLogFormat(env[ENV.logFormat]),
    limits: { adminBodyBytes: integer(env, ENV.adminBodyBytes, 1024 * 1024, 1024, 64 * 1024 * 1024) },
    console: {
      sessionMs: integer(env, ENV.consoleSessionMs, 30 * 60_000, 1_000, 7 * 86_400_000),
      sampleMs: integer(env, ENV.consoleSampleMs, 5_000, 200, 60_000),
    },
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
    vaultVersions: {
      perSecret: integer(env, ENV.vaultVersions, 10, 0, 1_000),
      scopeBytes: integer(env, ENV.vaultHistoryScopeBytes, 16 * 1024 * 1024, 0, 1024 * 1024 * 1024),
      // Counted per user *and app* (docs/vault.md "Versions"): no app fills another's, whatever the name says.
      appBytes: integer(env, ENV.vaultHistoryUserBytes, 64 * 1024 * 1024, 0, 16 * 1024 * 1024 * 1024),
      deletedForMs: integer(env, ENV.vaultDeletedDays, 7, 0, 3_650) * 86_400_000,
      // Not a setting: a write racing the erasure reads the key's history for seconds at most.
      scrubAfterMs: 60_000,
    },
    heartbeatMs: integer(env, ENV.heartbeatMs, 1_000, 50, 60_000),
    stopTimeoutMs,
    drainMs,
    tracing: parseTracing(env),
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
      history: parseHistory(env, keyring, Boolean(env[ENV.masterKey]) || uses(KEYRING_ROLES) || natsUrl === null),
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

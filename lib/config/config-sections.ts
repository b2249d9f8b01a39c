import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { OPTIONAL_STATE_ROLES, STATE_ROLES } from '../../bus/permissions.js';
import { ENV, integer, type Env } from './config-env.js';
import { ConfigError } from './config-error.js';
import { ROLES, type Config, type Role } from './config-types.js';
import { stateLoginVariable, type NatsAuth } from './nats-auth.js';
import { loadCertificates, type TlsSettings } from './tls-files.js';
import { historySeed, parseSeeds } from '../crypto/bus-anchors.js';
import type { Keyring } from '../crypto/keyring.js';

// Readers of the configuration's sections that take more than one line: each checks its
// variables and answers a ConfigError naming the variable and what it must be.

/** `--roles` or `PIER_ROLES`: a comma-separated list of known roles; unset, empty or `all` is every role. */
export function parseRoles(raw: string | undefined, source: string): Role[] {
  if (raw === undefined || raw === '' || raw === 'all') return [...ROLES];
  const roles = raw.split(',').map((r) => r.trim()).filter(Boolean);
  for (const r of roles) {
    if (!(ROLES as readonly string[]).includes(r)) throw new ConfigError(`${source}: unknown role "${r}" (roles: ${ROLES.join(', ')})`);
  }
  return [...new Set(roles)] as Role[];
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
export function parseCidrs(text: string): string[] {
  const entries = text.split(',').map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    const m = /^([^/]+)\/(\d{1,3})$/.exec(entry);
    const family = m ? isIP(m[1]) : 0;
    if (!m || family === 0 || Number(m[2]) > (family === 4 ? 32 : 128)) throw new ConfigError(`${ENV.providerNetworks}: "${entry}" is not a CIDR (like 10.0.0.0/8 or fd00::/8)`);
  }
  return entries;
}

/** `PIER_LOG_FORMAT`: json (the default) or pretty. */
export function parseLogFormat(text: string | undefined): Config['logFormat'] {
  if (text === undefined || text === '' || text === 'json') return 'json';
  if (text === 'pretty') return 'pretty';
  throw new ConfigError(`${ENV.logFormat}: must be json or pretty, got "${text}"`);
}

/** `PIER_STATE` and `PIER_JS_REPLICAS`: where state lives, and how many copies JetStream keeps. */
export function parseState(env: Env, natsUrl: string | null): Config['state'] {
  const kind = env[ENV.state] || 'lmdb';
  if (kind !== 'lmdb' && kind !== 'jetstream') throw new ConfigError(`${ENV.state}: must be lmdb or jetstream, got "${kind}"`);
  if (kind === 'jetstream' && !natsUrl) throw new ConfigError(`${ENV.state}=jetstream: needs ${ENV.natsUrl} (a JetStream-enabled NATS cluster)`);
  const replicas = integer(env, ENV.jsReplicas, 3, 1, 5);
  if (replicas % 2 === 0) throw new ConfigError(`${ENV.jsReplicas}: must be 1, 3 or 5 (a quorum needs an odd number), got ${replicas}`);
  return { kind, replicas };
}

/**
 * With an authenticated bus, each role that keeps state on JetStream reaches it through its own
 * account (docs/security.md "The bus"): its identity must carry that login, or the start stops here
 * rather than at the first write.
 */
export function checkStateLogins(state: Config['state'], roles: Role[], auth: NatsAuth, credsFile: string | undefined): Config['state'] {
  if (state.kind !== 'jetstream' || auth.user === null) return state;
  for (const role of roles.filter((r) => STATE_ROLES.includes(r) && !OPTIONAL_STATE_ROLES.includes(r))) {
    if (auth.state[role]) continue;
    const where = credsFile ? `${credsFile} has no ${stateLoginVariable(role)} line` : `${stateLoginVariable(role)} is not set`;
    throw new ConfigError(`${ENV.state}=jetstream: role ${role} keeps its state in its own NATS account, but ${where}: use the credentials of a current \`pier bus init\` (docs/operations.md, "Upgrading")`);
  }
  return state;
}

/** TLS settings, with every file checked now: a bad or missing one stops the start with one line. */
export function parseTls(env: Env, roles: Role[]): TlsSettings | null {
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

/** `PIER_ADMIN_HOSTS`: host names (no port) the admin listener answers besides loopback names and IP addresses. */
export function parseAdminHosts(text: string | undefined): string[] {
  const names = (text ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  if (names.length > 64) throw new ConfigError(`${ENV.adminHosts}: at most 64 names`);
  for (const n of names) if (!/^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/.test(n)) throw new ConfigError(`${ENV.adminHosts}: "${n}" is not a host name`);
  return names;
}

/**
 * The gateway's history (docs/gateway.md "History and recovery"): on unless `PIER_WS_HISTORY=off`, its
 * ceilings, and its keys: derived from the master key when this process holds one, else read from
 * `PIER_HISTORY_KEY` (an edge on NATS); with neither the edge keeps no history (it says so at start).
 */
export function parseHistory(env: Env, keyring: Keyring, holdsMasterKey: boolean): Config['gateway']['history'] {
  const flag = env[ENV.wsHistory] || 'on';
  if (flag !== 'on' && flag !== 'off') throw new ConfigError(`${ENV.wsHistory}: must be on or off, got "${flag}"`);
  let keys: Buffer[] | null = null;
  if (holdsMasterKey) keys = [keyring.current, ...(keyring.previous ? [keyring.previous] : [])].map(historySeed);
  else if (env[ENV.historyKey]) {
    let text: string;
    try {
      text = readFileSync(env[ENV.historyKey]!, 'utf8');
    } catch (err) {
      throw new ConfigError(`${ENV.historyKey}: cannot read ${env[ENV.historyKey]} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    try {
      keys = parseSeeds(text, ENV.historyKey);
    } catch (err) {
      throw new ConfigError((err as Error).message.replace('as `pier bus anchors` writes them', 'as `pier bus anchors` writes history.key'));
    }
  }
  return {
    on: flag === 'on',
    ceilings: {
      messages: integer(env, ENV.wsHistoryMessages, 100, 1, 100_000),
      bytes: integer(env, ENV.wsHistoryBytes, 1024 * 1024, 1024, 1024 * 1024 * 1024),
      ttlMs: integer(env, ENV.wsHistoryTtlS, 300, 1, 7 * 86_400) * 1_000,
    },
    messageBytes: integer(env, ENV.wsHistoryMessageBytes, 64 * 1024, 256, 16 * 1024 * 1024),
    storeBytes: integer(env, ENV.wsHistoryStoreBytes, 1024 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024 * 1024),
    replayBytesPerMin: integer(env, ENV.wsReplayBytesPerMin, 16 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    keys,
  };
}

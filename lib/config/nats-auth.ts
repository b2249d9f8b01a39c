import { readFileSync, statSync } from 'node:fs';
import { ENV } from './config-env.js';
import { STATE_ROLES, type BusRole } from '../../bus/permissions.js';

/** How a process proves itself to NATS and checks the server (docs/security.md "The bus"). */
export interface NatsAuth {
  /** The role identity (`pier-edge`, …); null: anonymous (a server with no authorization). */
  user: string | null;
  password: string | null;
  tls: { ca: string | null; cert: string | null; key: string | null } | null;
  /** Logins to the state accounts of the roles this identity runs (PIER_STATE=jetstream), by role. */
  state: Partial<Record<BusRole, StateLogin>>;
}

export interface StateLogin {
  user: string;
  password: string;
}

/** The variable (in a creds file or the environment) holding a role's state login as `user:password`. */
export const stateLoginVariable = (role: BusRole) => `NATS_STATE_${role.toUpperCase()}`;

const USER = /^[A-Za-z0-9_-]{1,64}$/;

function parseStateLogin(variable: string, value: string, source: string): StateLogin {
  const colon = value.indexOf(':');
  const user = value.slice(0, colon);
  const password = value.slice(colon + 1);
  if (colon < 0 || !USER.test(user) || password.length === 0) throw new NatsAuthError(`${source}: ${variable} must be user:password (as pier bus init writes it)`);
  return { user, password };
}

function stateLogins(values: Map<string, string> | Record<string, string | undefined>, source: string): NatsAuth['state'] {
  const get = (k: string) => (values instanceof Map ? values.get(k) : values[k]);
  const out: NatsAuth['state'] = {};
  for (const role of STATE_ROLES) {
    const value = get(stateLoginVariable(role));
    if (value) out[role] = parseStateLogin(stateLoginVariable(role), value, source);
  }
  return out;
}

export class NatsAuthError extends Error {
  override readonly name = 'NatsAuthError';
}

/**
 * A credentials file as `pier bus init` writes it: `NATS_USER=…` and `NATS_PASSWORD=…` lines
 * (comments with `#`), so it also serves as a compose `env_file`. It must be private (0600): a
 * file others can read is refused rather than used.
 */
export function readCredsFile(path: string, source = 'NATS_CREDS'): { user: string; password: string; state: NatsAuth['state'] } {
  let text: string;
  try {
    const mode = statSync(path).mode & 0o777;
    if (mode & 0o077) throw new NatsAuthError(`${source}: ${path} is readable by others (mode ${mode.toString(8)}): chmod 600 it`);
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if (err instanceof NatsAuthError) throw err;
    throw new NatsAuthError(`${source}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z_]+)\s*=\s*(.*?)\s*$/.exec(line);
    if (m && !line.trimStart().startsWith('#')) values.set(m[1], m[2]);
  }
  const user = values.get('NATS_USER');
  const password = values.get('NATS_PASSWORD');
  if (!user || !password) throw new NatsAuthError(`${source}: ${path} must hold NATS_USER=… and NATS_PASSWORD=… lines`);
  return { user, password, state: stateLogins(values, `${source} ${path}`) };
}

function readable(path: string, name: string): string {
  try {
    readFileSync(path);
    return path;
  } catch (err) {
    throw new NatsAuthError(`${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** The NATS identity and TLS settings from the environment: `NATS_CREDS` or `NATS_USER`/`NATS_PASSWORD`, `NATS_TLS_*`. */
export function natsAuthFrom(env: Record<string, string | undefined>): NatsAuth {
  const creds = env[ENV.natsCreds];
  const [givenUser, givenPassword] = [env[ENV.natsUser], env[ENV.natsPassword]];
  const [caFile, certFile, keyFile] = [env[ENV.natsTlsCa], env[ENV.natsTlsCert], env[ENV.natsTlsKey]];
  let user: string | null = null;
  let password: string | null = null;
  let state: NatsAuth['state'] = {};
  if (creds) {
    if (givenUser || givenPassword) throw new NatsAuthError('NATS_CREDS: give either a credentials file or NATS_USER/NATS_PASSWORD, not both');
    ({ user, password, state } = readCredsFile(creds));
  } else if (givenUser || givenPassword) {
    if (!givenUser || !givenPassword) throw new NatsAuthError('NATS_USER and NATS_PASSWORD go together');
    user = givenUser;
    password = givenPassword;
    state = stateLogins(env, 'environment');
  }
  if (user !== null && !USER.test(user)) throw new NatsAuthError(`NATS_USER: "${user}" must be 1-64 characters of [A-Za-z0-9_-]`);
  const ca = caFile ? readable(caFile, 'NATS_TLS_CA') : null;
  const cert = certFile ? readable(certFile, 'NATS_TLS_CERT') : null;
  const key = keyFile ? readable(keyFile, 'NATS_TLS_KEY') : null;
  if ((cert === null) !== (key === null)) throw new NatsAuthError('NATS_TLS_CERT and NATS_TLS_KEY go together (a client certificate and its key)');
  return { user, password, tls: ca || cert ? { ca, cert, key } : null, state };
}

/** The inbox prefix of an identity: its replies arrive under it, and only it may subscribe there. */
export function inboxPrefixOf(user: string | null): string {
  return user ? `_INBOX.${user}` : '_INBOX';
}

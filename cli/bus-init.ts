import bcrypt from 'bcryptjs';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUS_ROLES, stateAccountOf, STATE_ROLES, type BusRole, type RolePermissions } from '../bus/permissions.js';
import { permissionsFor, statePermissionsFor } from './roles.js';
import { inboxPrefixOf, stateLoginVariable } from '../lib/config/nats-auth.js';

/** A login to one role's state account (PIER_STATE=jetstream), carried by every identity with that role. */
export interface StateLogin {
  role: BusRole;
  user: string;
  password: string;
  permissions: RolePermissions;
}

/** One NATS identity: a name, the roles whose subjects it may use, and its password in clear (only in its creds file). */
export interface BusIdentity {
  name: string;
  user: string;
  roles: BusRole[];
  password: string;
  permissions: RolePermissions;
  /** One login per role of the identity that keeps state on JetStream, each in that role's own account. */
  state: StateLogin[];
}

/** The account every Pier service identity shares: the service bus, with no JetStream. */
export const SERVICE_ACCOUNT = 'PIER';

export const IDENTITY_NAME = /^[a-z][a-z0-9-]{0,30}$/;

/**
 * The identities `pier bus init` makes: one per role (`pier-edge`, …), one for a process running
 * every role (`pier-all`), and any combination asked for (`--identity actors=token,vault`).
 */
export function planIdentities(extra: Record<string, BusRole[]> = {}): BusIdentity[] {
  const wanted: Array<[string, BusRole[]]> = [...BUS_ROLES.map((r): [string, BusRole[]] => [r, [r]]), ['all', [...BUS_ROLES]], ...Object.entries(extra)];
  const seen = new Set<string>();
  return wanted.map(([name, roles]) => {
    if (!IDENTITY_NAME.test(name)) throw new Error(`identity "${name}": must match ${IDENTITY_NAME}`);
    if (seen.has(name)) throw new Error(`identity "${name}" is given twice`);
    seen.add(name);
    const user = `pier-${name}`;
    const state = roles
      .filter((r) => STATE_ROLES.includes(r))
      .map((role) => {
        const login = `${user}-state-${role}`;
        return { role, user: login, password: secret(), permissions: statePermissionsFor(role, inboxPrefixOf(login)) };
      });
    return { name, user, roles, password: secret(), permissions: permissionsFor(roles, inboxPrefixOf(user)), state };
  });
}

const secret = () => randomBytes(24).toString('base64url');
const quote = (s: string) => JSON.stringify(s);
const list = (xs: string[]) => `[${xs.map(quote).join(', ')}]`;

function userEntry(comment: string, user: string, password: string, permissions: RolePermissions, cost: number): string {
  return [
    '      {',
    `        # ${comment}`,
    `        user: ${quote(user)}`,
    `        password: ${quote(bcrypt.hashSync(password, cost))}`,
    '        permissions: {',
    `          publish: { allow: ${list(permissions.publish)} }`,
    `          subscribe: { allow: ${list(permissions.subscribe)} }`,
    '          allow_responses: true',
    '        }',
    '      }',
  ].join('\n');
}

/**
 * The nats-server `accounts` block (docs/security.md "The bus"). Every service identity lives in one
 * account, `PIER`, without JetStream: its allow-lists are the whole of what it can reach. Each
 * role that keeps state on JetStream has an account of its own (`PIER_STATE_VAULT`, …) with
 * JetStream and no service at all, entered only by that role's state logins: whatever a stolen
 * state login makes JetStream do (a push consumer delivering anywhere, a stream capturing
 * `_INBOX.>`, a direct get answered onto any subject) lands in that account, where nothing of
 * another role is. Passwords are bcrypt hashes; `allow_responses` lets an identity answer the
 * requests it received, and nothing else.
 */
export function authorizationConf(identities: BusIdentity[], cost = 10): string {
  const service = identities.map((id) => userEntry(`roles: ${id.roles.join(', ')}`, id.user, id.password, id.permissions, cost));
  const stateAccounts = STATE_ROLES.map((role) => {
    const logins = identities.flatMap((id) => id.state.filter((l) => l.role === role).map((l) => userEntry(`state of ${role}, for identity ${id.name}`, l.user, l.password, l.permissions, cost)));
    return [`  ${stateAccountOf(role)}: {`, '    jetstream: enabled', '    users: [', ...logins, '    ]', '  }'].join('\n');
  });
  return [
    '# Pier bus identities, written by `pier bus init`. Include this file from nats-server.conf',
    '# (`include ./auth.conf`). Passwords are bcrypt hashes; the clear ones are only in the .nats.env files.',
    'accounts {',
    `  ${SERVICE_ACCOUNT}: {`,
    '    users: [',
    service.join('\n'),
    '    ]',
    '  }',
    ...stateAccounts,
    '}',
    '',
  ].join('\n');
}

export function credsFile(id: BusIdentity): string {
  return [
    `# NATS identity of Pier role(s) ${id.roles.join(',')}: keep private (0600).`,
    `# Use as NATS_CREDS=<this file>, or as a compose env_file.`,
    `NATS_USER=${id.user}`,
    `NATS_PASSWORD=${id.password}`,
    ...(id.state.length > 0 ? ['# The logins to the state accounts of its roles (PIER_STATE=jetstream): user:password.'] : []),
    ...id.state.map((l) => `${stateLoginVariable(l.role)}=${l.user}:${l.password}`),
    '',
  ].join('\n');
}

/** Writes `auth.conf` and one `<name>.nats.env` (0600) per identity into `dir`; never overwrites. */
export function writeBusInit(dir: string, identities: BusIdentity[]): { dir: string; server: string; identities: Array<{ name: string; user: string; roles: BusRole[]; creds: string }> } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const server = join(dir, 'auth.conf');
  if (existsSync(server)) throw new Error(`${server} exists: remove it (and the .nats.env files) or choose another --out`);
  const out = identities.map((id) => {
    const creds = join(dir, `${id.name}.nats.env`);
    writeFileSync(creds, credsFile(id), { flag: 'wx', mode: 0o600 });
    chmodSync(creds, 0o600);
    return { name: id.name, user: id.user, roles: id.roles, creds };
  });
  writeFileSync(server, authorizationConf(identities), { flag: 'wx', mode: 0o600 });
  return { dir, server, identities: out };
}

import bcrypt from 'bcryptjs';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BUS_ROLES, permissionsFor, type BusRole, type RolePermissions } from '../bus/permissions.js';
import { inboxPrefixOf } from './nats-auth.js';

/** One NATS identity: a name, the roles whose subjects it may use, and its password in clear (only in its creds file). */
export interface BusIdentity {
  name: string;
  user: string;
  roles: BusRole[];
  password: string;
  permissions: RolePermissions;
}

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
    return { name, user, roles, password: randomBytes(24).toString('base64url'), permissions: permissionsFor(roles, inboxPrefixOf(user)) };
  });
}

const quote = (s: string) => JSON.stringify(s);
const list = (xs: string[]) => `[${xs.map(quote).join(', ')}]`;

/**
 * The nats-server `authorization` block: each identity with its bcrypt-hashed password and its
 * allow-lists; `allow_responses` lets it answer the requests it received, and nothing else.
 */
export function authorizationConf(identities: BusIdentity[], cost = 10): string {
  const users = identities.map((id) =>
    [
      '    {',
      `      # roles: ${id.roles.join(', ')}`,
      `      user: ${quote(id.user)}`,
      `      password: ${quote(bcrypt.hashSync(id.password, cost))}`,
      '      permissions: {',
      `        publish: { allow: ${list(id.permissions.publish)} }`,
      `        subscribe: { allow: ${list(id.permissions.subscribe)} }`,
      '        allow_responses: true',
      '      }',
      '    }',
    ].join('\n'),
  );
  return [
    '# Pier bus identities, written by `pier bus init`. Include this file from nats-server.conf',
    '# (`include ./auth.conf`). Passwords are bcrypt hashes; the clear ones are only in the .creds files.',
    'authorization {',
    '  users = [',
    users.join('\n'),
    '  ]',
    '}',
    '',
  ].join('\n');
}

export function credsFile(id: BusIdentity): string {
  return [`# NATS identity of Pier role(s) ${id.roles.join(',')}: keep private (0600).`, `# Use as NATS_CREDS=<this file>, or as a compose env_file.`, `NATS_USER=${id.user}`, `NATS_PASSWORD=${id.password}`, ''].join('\n');
}

/** Writes `auth.conf` and one `<name>.creds` (0600) per identity into `dir`; never overwrites. */
export function writeBusInit(dir: string, identities: BusIdentity[]): { dir: string; server: string; identities: Array<{ name: string; user: string; roles: BusRole[]; creds: string }> } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const server = join(dir, 'auth.conf');
  if (existsSync(server)) throw new Error(`${server} exists: remove it (and the .creds files) or choose another --out`);
  const out = identities.map((id) => {
    const creds = join(dir, `${id.name}.creds`);
    writeFileSync(creds, credsFile(id), { flag: 'wx', mode: 0o600 });
    chmodSync(creds, 0o600);
    return { name: id.name, user: id.user, roles: id.roles, creds };
  });
  writeFileSync(server, authorizationConf(identities), { flag: 'wx', mode: 0o600 });
  return { dir, server, identities: out };
}

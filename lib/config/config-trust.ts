import { readFileSync } from 'node:fs';
import { anchorsOfKeyring, isAnchoredRole, parseAnchors, parseSeeds, roleSeed, RoleKeys, ANCHORED_ROLES, ROLE_KEY_VARIABLES, type AnchoredRole, type Anchors, type KeyFileRole } from '../crypto/bus-anchors.js';
import { ENV, type Env } from './config-env.js';
import { ConfigError } from './config-error.js';
import type { BusRole } from '../../bus/permissions.js';
import type { Keyring } from '../crypto/keyring.js';

/** What a process trusts on the bus (docs/security.md, "Keys with an anchor"). */
export interface BusTrust {
  /** Every anchored role's public keys, the preferred first; empty when this process has no anchor (the in-process bus needs none). */
  anchors: Anchors;
  /** The private keys of the anchored roles this process runs, the preferred first. */
  own: Map<AnchoredRole, RoleKeys[]>;
  /** Where the anchors come from: the master key, the anchors file, or nowhere. */
  source: 'master key' | 'anchors file' | 'none';
}

function readFile(env: Env, name: string): string {
  try {
    return readFileSync(env[name]!, 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}: cannot read ${env[name]} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

const sameAnchors = (a: Anchors, b: Anchors) => ANCHORED_ROLES.every((r) => (a[r]?.[0]?.seal ?? '') === (b[r]?.[0]?.seal ?? ''));

/**
 * The bus trust of a process: from the master key when it holds one (`masterKeyGiven`: set in the
 * environment or kept by a keyring role), else from `PIER_BUS_ANCHORS`. A callback replica without
 * the master key reads its role's private seed from its key file. On NATS a process must
 * have one of the two: without an anchor it could neither seal a secret nor believe a grant. A
 * callback or admin process without the master key reads its role key (`PIER_CALLBACK_KEY`,
 * `PIER_ADMIN_KEY`) besides.
 */
export function busTrustFrom(env: Env, roles: readonly BusRole[], keyring: Keyring, masterKeyGiven: boolean, onNats: boolean): BusTrust {
  let pinned: Anchors | null = null;
  if (env[ENV.busAnchors]) {
    try {
      pinned = parseAnchors(readFile(env, ENV.busAnchors), ENV.busAnchors);
    } catch (err) {
      throw err instanceof ConfigError ? err : new ConfigError((err as Error).message);
    }
  }
  const own = new Map<AnchoredRole, RoleKeys[]>();
  if (masterKeyGiven) {
    const derived = anchorsOfKeyring(keyring);
    if (pinned && !sameAnchors(pinned, derived)) throw new ConfigError(`${ENV.busAnchors}: its keys are not those of this master key (write it again with \`pier bus anchors\`)`);
    const masters = [keyring.current, ...(keyring.previous ? [keyring.previous] : [])];
    for (const role of roles) if (isAnchoredRole(role)) own.set(role, masters.map((m) => new RoleKeys(roleSeed(m, role))));
    return { anchors: derived, own, source: 'master key' };
  }
  for (const [role, variable] of Object.entries(ROLE_KEY_VARIABLES) as Array<[KeyFileRole, string]>) {
    if (!roles.includes(role)) continue;
    if (!env[variable]) {
      if (onNats) throw new ConfigError(`${variable}: a process running ${role} without ${ENV.masterKey} needs the role's key (\`pier bus anchors --out DIR\` writes ${role}.key)`);
      continue;
    }
    let seeds: Buffer[];
    try {
      seeds = parseSeeds(readFile(env, variable), variable);
    } catch (err) {
      throw err instanceof ConfigError ? err : new ConfigError((err as Error).message);
    }
    const keys = seeds.map((s) => new RoleKeys(s));
    if (pinned && !keys.some((k) => pinned![role]?.some((a) => a.seal === k.seal.publicKey))) throw new ConfigError(`${variable}: this key is not the ${role} role's in ${ENV.busAnchors} (write both again with \`pier bus anchors\`)`);
    own.set(role, keys);
  }
  if (onNats && !pinned) {
    throw new ConfigError(`${ENV.busAnchors}: a process on NATS without ${ENV.masterKey} needs the bus anchors (\`pier bus anchors --out DIR\` writes them; docs/operations.md)`);
  }
  return { anchors: pinned ?? {}, own, source: pinned ? 'anchors file' : 'none' };
}

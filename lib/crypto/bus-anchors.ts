import { createPrivateKey, createPublicKey, hkdfSync, sign, verify, type KeyObject } from 'node:crypto';
import { KeyPair, isPublicKey } from '../../bus/seal.js';
import type { Keyring } from './keyring.js';

/**
 * Trust anchors of the bus (docs/security.md, "Keys with an anchor"). A secret crossing the bus is
 * sealed only to a key anchored in what a stolen `.nats.env` file does not give, and every reply or
 * event that grants something is made with such a key:
 *
 * - each anchored role has an X25519 key (what is sealed to the role opens with it, and a grant
 *   sealed *from* it proves the role made it) and an Ed25519 key (it signs the role's broadcasts:
 *   the registry's changes and heartbeats), both derived from the master key by HKDF;
 * - a process holding the master key derives every role's keys itself; a process without it (an
 *   edge, the admin, the upload actor) reads the public halves from the anchors file
 *   (`PIER_BUS_ANCHORS`, written by `pier bus anchors`), and a callback or admin process its own
 *   role's private seed from `PIER_CALLBACK_KEY` / `PIER_ADMIN_KEY` (those roles never hold the
 *   master key).
 *
 * Heartbeats still announce keys, but an announced key is only used when it is one of these.
 */

/** Roles with anchored keys: the ones a secret is sealed to, a grant comes from, or (admin) the only one that may ask. */
export const ANCHORED_ROLES = ['registry', 'token', 'provider', 'vault', 'callback', 'admin'] as const;
/**
 * Anchored roles that do not hold the master key: each process of theirs reads its role's private
 * key from a file `pier bus anchors` writes (`<role>.key`), named by this variable.
 */
export const ROLE_KEY_VARIABLES = { callback: 'PIER_CALLBACK_KEY', admin: 'PIER_ADMIN_KEY' } as const;
export type KeyFileRole = keyof typeof ROLE_KEY_VARIABLES;
export type AnchoredRole = (typeof ANCHORED_ROLES)[number];
export const isAnchoredRole = (role: string): role is AnchoredRole => (ANCHORED_ROLES as readonly string[]).includes(role);

const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SEED_BYTES = 32;

/** The 32-byte seed of a role's keys under one master key: what a callback replica is given instead of the master key. */
export function roleSeed(master: Buffer, role: AnchoredRole): Buffer {
  // The info string predates anchors (role keys were announced then): kept so keys stay the same.
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `pier bus role key|${role}`, SEED_BYTES));
}

/**
 * The key sealing the gateway's history at rest under one master key (actors/history/seal.ts):
 * what `pier bus anchors` writes to `history.key` for edges, which do not hold the master key.
 */
export function historySeed(master: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'pier gateway history key v1', SEED_BYTES));
}

/** The `history.key` file (`PIER_HISTORY_KEY`): base64url keys, the current master key's first. */
export function formatHistoryKeys(keys: readonly Buffer[]): string {
  return `# The key sealing Pier's gateway history at rest (PIER_HISTORY_KEY=<this file>). Secret: keep it 0600, and give it only to edge processes.\n${keys.map((s) => s.toString('base64url')).join('\n')}\n`;
}

/** A role's private keys, from its seed: X25519 for boxes, Ed25519 for broadcast signatures. */
export class RoleKeys {
  readonly seal: KeyPair;
  readonly signKey: KeyObject;
  readonly signPublic: string;

  constructor(seed: Buffer) {
    this.seal = KeyPair.fromSeed(seed);
    const signSeed = Buffer.from(hkdfSync('sha256', seed, Buffer.alloc(0), 'pier bus role sign key', SEED_BYTES));
    this.signKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, signSeed]), format: 'der', type: 'pkcs8' });
    this.signPublic = createPublicKey(this.signKey).export({ format: 'jwk' }).x!;
  }

  sign(data: Uint8Array): Buffer {
    return sign(null, data, this.signKey);
  }
}

/** The public halves of one role's anchored keys. */
export interface RoleAnchor {
  seal: string;
  sign: string;
}

/** Every anchored role's public keys, the current master key's first (a rotation pins both for a while). */
export type Anchors = Partial<Record<AnchoredRole, RoleAnchor[]>>;

export function anchorsFromMasterKeys(masters: readonly Buffer[]): Anchors {
  const out: Anchors = {};
  for (const role of ANCHORED_ROLES) {
    out[role] = masters.map((m) => {
      const keys = new RoleKeys(roleSeed(m, role));
      return { seal: keys.seal.publicKey, sign: keys.signPublic };
    });
  }
  return out;
}

export const anchorsOfKeyring = (keyring: Keyring): Anchors => anchorsFromMasterKeys([keyring.current, ...(keyring.previous ? [keyring.previous] : [])]);

/** The anchors file: one line per role and key, `<role>=<seal key>.<sign key>`, the preferred first; `#` comments. */
export function formatAnchors(anchors: Anchors): string {
  const lines = ['# Pier bus anchors, written by `pier bus anchors`: the public keys of the roles that hold secrets.', '# Not secret. Give it to every Pier process that runs without the master key (PIER_BUS_ANCHORS=<this file>).'];
  for (const role of ANCHORED_ROLES) for (const a of anchors[role] ?? []) lines.push(`${role}=${a.seal}.${a.sign}`);
  return `${lines.join('\n')}\n`;
}

/** Parses an anchors file; throws with the line at fault. */
export function parseAnchors(text: string, source: string): Anchors {
  const out: Anchors = {};
  const lines = text.split('\n');
  if (lines.length > 1_000) throw new Error(`${source}: not an anchors file (over 1,000 lines)`);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const m = /^([a-z]+)=([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{43})$/.exec(line);
    if (!m || !isAnchoredRole(m[1]) || !isPublicKey(m[2]) || !isPublicKey(m[3])) throw new Error(`${source}, line ${i + 1}: expected <role>=<seal key>.<sign key> with role one of ${ANCHORED_ROLES.join(', ')}`);
    const list = (out[m[1]] ??= []);
    if (list.length >= 2) throw new Error(`${source}, line ${i + 1}: at most two keys per role (the current and the previous master key's)`);
    list.push({ seal: m[2], sign: m[3] });
  });
  return out;
}

/** The seed file a callback or admin process reads (`PIER_CALLBACK_KEY`, `PIER_ADMIN_KEY`): base64url seeds, the current first, one per line. */
export function formatSeeds(seeds: readonly Buffer[], role: KeyFileRole): string {
  return `# The private key of Pier's ${role} role (${ROLE_KEY_VARIABLES[role]}=<this file>). Secret: keep it 0600, and give it only to processes of this role.\n${seeds.map((s) => s.toString('base64url')).join('\n')}\n`;
}

export function parseSeeds(text: string, source: string): Buffer[] {
  const seeds = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  if (seeds.length === 0 || seeds.length > 2 || !seeds.every((s) => /^[A-Za-z0-9_-]{43}$/.test(s))) throw new Error(`${source}: expected one or two 32-byte keys in base64url (as \`pier bus anchors\` writes them)`);
  return seeds.map((s) => Buffer.from(s, 'base64url'));
}

/** Whether `sig` over `data` is by one of `signKeys` (raw Ed25519 public keys, base64url). */
export function verifiedBy(signKeys: readonly KeyObject[], data: Uint8Array, sig: Uint8Array): boolean {
  for (const key of signKeys) {
    try {
      if (verify(null, data, key, sig)) return true;
    } catch {
      // a malformed signature: not by this key
    }
  }
  return false;
}

export function importSignKey(x: string): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
}

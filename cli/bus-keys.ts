import { hkdfSync } from 'node:crypto';
import type { BusSealing } from '../bus/bus.js';
import { KeyPair, Sealer } from '../bus/seal.js';
import { KEYRING_ROLES } from '../lib/config.js';
import type { Keyring } from '../lib/keyring.js';
import type { Peers } from '../lib/peers.js';

/** Requests to the roles that hold the master key (KEYRING_ROLES) are sealed to the role: any replica opens them. */

/**
 * A role's key pairs, derived from the master key (and the previous one during a rotation), so every
 * replica of the role holds the same ones without any exchange. The current key's pair comes first.
 */
export function roleKeyPairs(keyring: Keyring, role: string): KeyPair[] {
  const derive = (master: Buffer) => KeyPair.fromSeed(Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), `pier bus role key|${role}`, 32)));
  return [keyring.current, ...(keyring.previous ? [keyring.previous] : [])].map(derive);
}

/** How long a request waits for a first heartbeat of the role it is sealed to (a cluster just starting). */
const FIRST_KEY_WAIT_MS = 3_000;

/** The process's sealing: its own key pair, the role keys of the roles it runs, the keys peers announced. */
export class BusKeys implements BusSealing {
  readonly sealer = new Sealer(KeyPair.generate());
  private readonly own = new Map<string, KeyPair[]>();
  private peers: Peers | null = null;

  constructor(keyring: Keyring | null, roles: readonly string[]) {
    for (const role of roles) if (keyring && (KEYRING_ROLES as readonly string[]).includes(role)) this.own.set(role, roleKeyPairs(keyring, role));
  }

  /** Peers learn keys from heartbeats, which carry this process's keys: the two meet once. */
  attach(peers: Peers): void {
    this.peers = peers;
  }

  roleKeys(role: string): readonly KeyPair[] {
    return this.own.get(role) ?? [];
  }

  /** What this process announces for `role`: the public halves, the preferred one first. */
  announced(role: string): string[] {
    return this.roleKeys(role).map((k) => k.publicKey);
  }

  recipientFor(role: string): Promise<string | null> {
    return this.peers ? this.peers.recipientWithin(role, FIRST_KEY_WAIT_MS) : Promise.resolve(null);
  }

  keyOf(busId: string, role: string): string | null {
    return this.peers?.keyOf(busId, role) ?? null;
  }
}

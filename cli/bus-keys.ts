import type { BusSealing } from '../bus/bus.js';
import { KeyPair, Sealer } from '../bus/seal.js';
import { importSignKey, isAnchoredRole, verifiedBy } from '../lib/crypto/bus-anchors.js';
import type { BusTrust } from '../lib/config/config-trust.js';
import type { Peers } from '../lib/runtime/peers.js';
import type { KeyObject } from 'node:crypto';

/** How long a request waits for a first heartbeat of the role it is sealed to (a cluster just starting). */
const FIRST_KEY_WAIT_MS = 3_000;

/**
 * The process's sealing (docs/security.md, "Keys with an anchor"): its own key pair, the keys of the
 * anchored roles it runs, and the anchors every other role's keys are checked against. Heartbeats
 * say which anchored key a role's live replicas hold (during a master key rotation, the old or the
 * new); a key a heartbeat announces that is not anchored is never sealed to.
 */
export class BusKeys implements BusSealing {
  readonly sealer = new Sealer(KeyPair.generate());
  private peers: Peers | null = null;
  private readonly signKeys = new Map<string, KeyObject[]>();
  private readonly sealKeys = new Map<string, string[]>();
  private readonly ownSeal = new Map<string, KeyPair[]>();
  /**
   * The key last chosen per role, for a quarter of a second: the choice follows heartbeats (one a
   * second), and working it out again on every vault read cost more than the read's seal.
   */
  private readonly chosen = new Map<string, { key: string; until: number }>();

  constructor(private readonly trust: BusTrust) {
    for (const [role, anchors] of Object.entries(trust.anchors)) {
      this.signKeys.set(role, anchors.map((a) => importSignKey(a.sign)));
      this.sealKeys.set(role, anchors.map((a) => a.seal));
    }
    for (const [role, keys] of trust.own) this.ownSeal.set(role, keys.map((k) => k.seal));
  }

  /** Peers learn keys from heartbeats, which carry this process's keys: the two meet once. */
  attach(peers: Peers): void {
    this.peers = peers;
  }

  roleKeys(role: string): readonly KeyPair[] {
    return this.ownSeal.get(role) ?? [];
  }

  /** What this process announces for `role`: the public halves, the preferred one first. */
  announced(role: string): string[] {
    return this.roleKeys(role).map((k) => k.publicKey);
  }

  anchored(role: string): readonly string[] {
    return this.sealKeys.get(role) ?? [];
  }

  isAnchored(role: string, key: string): boolean {
    return this.anchored(role).includes(key);
  }

  async recipientFor(role: string): Promise<string | null> {
    const now = Date.now();
    const memo = this.chosen.get(role);
    if (memo && memo.until > now) return memo.key;
    const anchored = this.anchored(role);
    if (anchored.length === 0) return null;
    const heard = this.peers ? await this.peers.recipientWithin(role, anchored, FIRST_KEY_WAIT_MS) : null;
    // No replica heard in time: the preferred anchored key (whoever answers must hold it).
    if (heard === null) return anchored[0];
    this.chosen.set(role, { key: heard, until: now + 250 });
    return heard;
  }

  signAs(role: string, data: Uint8Array): Uint8Array | null {
    const own = isAnchoredRole(role) ? this.trust.own.get(role) : undefined;
    return own ? own[0].sign(data) : null;
  }

  signedAs(role: string, data: Uint8Array, sig: Uint8Array): boolean {
    const keys = this.signKeys.get(role);
    return keys !== undefined && verifiedBy(keys, data, sig);
  }
}

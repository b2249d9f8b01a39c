import { generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import type { Heartbeat, ProcessInfo } from '../../bus/subjects.js';
import { heartbeatSigned as signed, roleSignature, type RoleProof } from './heartbeat-proof.js';

/** The wire format whose heartbeats may say `leaving` (a process of an earlier one would find its signature bad). */
export const LEAVING_WIRE = 2;

/** What this process's heartbeats carry besides its ProcessInfo (./peers.ts PeersOptions). */
export interface OwnBeatOptions {
  /** This process's public key, announced with every heartbeat (bus/seal.ts). */
  key: string;
  /** The role keys this process opens requests to `role` with (empty: the role has none). */
  roleKeys?: (role: string) => string[];
  /** The anchored role keys heartbeats are proven with (./heartbeat-proof.ts). */
  proof?: RoleProof;
}

/**
 * This process's heartbeats (./peers.ts), one per role it runs per beat. Each is signed with a key
 * pair the process made at start, and counts up: its peers bind its id to that key for as long as it
 * lives and take a heartbeat that is not newer than the last one heard for a replay. Where the
 * process holds the role's anchored key, the heartbeat is signed with that too (./heartbeat-proof.ts).
 */
export class OwnBeats {
  private readonly signing = generateKeyPairSync('ed25519');
  readonly signKey = this.signing.publicKey.export({ format: 'jwk' }).x!;
  private seq = 0;
  private readonly cached = new Map<string, Heartbeat>();

  constructor(
    private readonly self: ProcessInfo,
    private readonly options: OwnBeatOptions,
  ) {}

  /** The public half of the key its heartbeats (and what it signs with `sign`) are signed with. */
  get publicKey(): KeyObject {
    return this.signing.publicKey;
  }

  /** A new beat: from now on each role's heartbeat carries the next count (and is signed afresh). */
  next(): void {
    this.seq++;
  }

  /** This process's heartbeat for `role`, signed once per beat (reads of the directory use it too). */
  beatFor(role: string): Heartbeat {
    const cached = this.cached.get(role);
    if (cached && cached.seq === this.seq) return cached;
    const body = { ...this.self, key: this.options.key, roleKeys: this.options.roleKeys?.(role) ?? [], seq: this.seq, signKey: this.signKey };
    const beat = this.signedBeat(role, body);
    this.cached.set(role, beat);
    return beat;
  }

  /** Its goodbye for `role`: a last heartbeat, signed, saying `leaving` (./peers.ts `stop`). */
  goodbyeFor(role: string): Heartbeat {
    const body = { ...this.self, key: this.options.key, roleKeys: this.options.roleKeys?.(role) ?? [], seq: this.seq, signKey: this.signKey, leaving: true as const };
    return this.signedBeat(role, body);
  }

  /**
   * Whether `beat`, heard on `role`'s subject under this process's id, is its own come back: signed
   * by its key, and of this beat or the one before (not an old one played back).
   */
  isOwn(role: string, beat: Heartbeat): boolean {
    return beat.signKey === this.signKey && beat.seq >= this.seq - 1 && verify(null, signed(role, beat), this.signing.publicKey, Buffer.from(beat.sig, 'base64url'));
  }

  /** This process's signature (its heartbeat key) over `data`: for what it answers that others must trust. */
  sign(data: Buffer): string {
    return sign(null, data, this.signing.privateKey).toString('base64url');
  }

  /** A heartbeat signed by this process's key (`sig`, what 0.2 checks) and, where it holds the role's anchored key, by that (`roleSig`). */
  private signedBeat(role: string, body: Omit<Heartbeat, 'sig' | 'roleSig'>): Heartbeat {
    const roleSig = roleSignature(this.options.proof, role, body);
    return { ...body, sig: sign(null, signed(role, body), this.signing.privateKey).toString('base64url'), ...(roleSig === undefined ? {} : { roleSig }) };
  }
}

/** Whether `sig` (base64url) over `data` is by `key`: false without a key, or for a malformed signature. */
export function signedWith(key: KeyObject | null | undefined, data: Buffer, sig: string): boolean {
  if (!key) return false;
  try {
    return verify(null, data, key, Buffer.from(sig, 'base64url'));
  } catch {
    return false;
  }
}

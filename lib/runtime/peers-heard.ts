import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { FIRST_WIRE, wireOverlaps, type Heartbeat, type ProcessInfo } from '../../bus/subjects.js';
import { heartbeatSigned as signed, isProven, unprovable, type RoleProof } from './heartbeat-proof.js';
import { saidGoodbye, type Entry } from './peers-expiry.js';
import { LEAVING_WIRE } from './peers-own.js';

/** What ./peers.ts PeersOptions says of the heartbeats heard. */
export interface HeardOptions {
  deadAfterMs: number;
  proof?: RoleProof;
  onRefused?: (why: string) => void;
  onMismatch?: (peer: ProcessInfo, role: string) => void;
}

/** What ./peers.ts is told of: a process ended (goodbye), or a process heard for the first time (or again after its death). */
export interface HeardEvents {
  died(peer: ProcessInfo): void;
  arrived(): void;
}

/**
 * What the other processes' heartbeats said (./peers.ts): which processes live on each role's
 * subject, under which keys, and which wire formats they speak. A heartbeat is believed only as
 * ./peers.ts describes (bound id and key, counting up, at most `maxPeers` per role); what it says of
 * its formats holds others back only when proven (./heartbeat-proof.ts).
 */
export class HeardPeers {
  readonly seen = new Map<string, Entry>();
  /** Processes whose unproven claim of a disjoint window was said (once each, as a mismatch is). */
  private readonly unprovenClaims = new Set<string>();

  constructor(
    private readonly self: ProcessInfo,
    private readonly options: HeardOptions,
    private readonly maxPeers: number,
    private readonly now: () => number,
    private readonly events: HeardEvents,
  ) {}

  /** A heartbeat of another process, heard on `role`'s subject: kept, or refused by name (`onRefused`). */
  hear(role: string, beat: Heartbeat): void {
    const id = `${role}|${beat.id}`;
    const known = this.seen.get(id);
    const live = known && !known.dead ? known : null;
    if (live && (live.beat.signKey !== beat.signKey || live.beat.busId !== beat.busId || live.beat.key !== beat.key)) {
      this.options.onRefused?.(`a second claimant of the live ${role} process ${beat.id}`);
      return;
    }
    // A bus id names one process: another id claiming a live one's is not believed (an identity of
    // the role announcing itself under a real edge's bus id, to sign its notices or fake its death).
    if (!live && [...this.seen.values()].some((e) => !e.dead && e.beat.busId === beat.busId && e.beat.id !== beat.id)) {
      this.options.onRefused?.(`a second claimant of the live bus id ${beat.busId}`);
      return;
    }
    // A replay, of a live process or of one that ended (said goodbye, or was declared dead) with the
    // same key: it does not bring it back. (A process that returns after being declared dead counts on.)
    if (known && known.beat.signKey === beat.signKey && beat.seq <= known.beat.seq) {
      this.options.onRefused?.(`a replayed heartbeat of ${role} process ${beat.id}`);
      return;
    }
    if (!known && this.liveOf(role) >= this.maxPeers) {
      this.options.onRefused?.(`more than ${this.maxPeers} ${role} processes announced`);
      return;
    }
    const signKey = live?.signKey ?? importSignKey(beat.signKey);
    if (!signKey || !verify(null, signed(role, beat), signKey, Buffer.from(beat.sig, 'base64url'))) {
      this.options.onRefused?.(`a heartbeat of ${role} process ${beat.id} with a bad signature`);
      return;
    }
    const proven = isProven(this.options.proof, role, beat);
    if (beat.leaving === true) {
      saidGoodbye(this.seen, id, role, beat, signKey, proven, this.now, this.events.died);
      return;
    }
    // What the process says of its roles is kept as the one role its subject proves.
    this.seen.set(id, { beat: { ...beat, roles: [role] }, role, at: this.now(), dead: false, signKey, proven });
    if (!this.speaksWith(beat)) this.saidMismatch(id, role, beat, proven, !known || known.dead);
    if (!known || known.dead) this.events.arrived();
  }

  /** The heartbeats of the live `role` processes that share a wire format with this one (this one not included). */
  alive(role: string): Heartbeat[] {
    const now = this.now();
    const others: Heartbeat[] = [];
    for (const e of this.seen.values()) if (e.role === role && this.fresh(e, now) && this.speaksWith(e.beat)) others.push(e.beat);
    return others;
  }

  /** Live processes that share no wire format with this one, as far as their heartbeats are believed (./peers.ts `mismatched`). */
  mismatched(): ProcessInfo[] {
    const now = this.now();
    const out = new Map<string, ProcessInfo>();
    for (const e of this.seen.values()) {
      if (!this.fresh(e, now) || this.speaksWith(e.beat) || !this.believed(e)) continue;
      const { key: _k, roleKeys: _r, sig: _s, seq: _q, signKey: _g, roleSig: _p, ...info } = e.beat;
      const known = out.get(info.id);
      out.set(info.id, known ? { ...known, roles: [...known.roles, e.role] } : info);
    }
    return [...out.values()];
  }

  /** Whether every live `role` process heard that shares a format with this one, and is believed, speaks `wire` or later (./peers.ts `allSpeak`). */
  allSpeak(role: string, wire: number, now: number): boolean {
    for (const e of this.seen.values()) {
      if (e.role !== role || !this.fresh(e, now) || !this.speaksWith(e.beat) || !this.believed(e)) continue;
      if ((e.beat.wire ?? FIRST_WIRE).speaks < wire) return false;
    }
    return true;
  }

  /** Whether a proven live process speaks a wire format without goodbyes (./peers.ts `stop` then withholds its own). */
  holdsGoodbyeBack(): boolean {
    const now = this.now();
    return [...this.seen.values()].some((e) => e.proven && this.fresh(e, now) && (e.beat.wire ?? FIRST_WIRE).speaks < LEAVING_WIRE);
  }

  /** The heartbeat key of the live process `id` (on any role). */
  signKeyOf(id: string): KeyObject | undefined {
    return [...this.seen.values()].find((e) => !e.dead && e.beat.id === id)?.signKey;
  }

  /** The `role` process heard with bus id `busId`: a live one, or also one declared dead. */
  onBus(busId: string, role: string, evenIfDeclaredDead: boolean): Entry | undefined {
    return [...this.seen.values()].find((e) => (evenIfDeclaredDead || !e.dead) && e.role === role && e.beat.busId === busId);
  }

  speaksWith(beat: Pick<ProcessInfo, 'wire'>): boolean {
    return wireOverlaps(beat.wire ?? FIRST_WIRE, this.self.wire ?? FIRST_WIRE);
  }

  /** Whether what a process's heartbeat claims about its formats is believed where it would hold others back. */
  private believed(e: Pick<Entry, 'proven' | 'role'>): boolean {
    return e.proven || unprovable(this.options.proof, e.role);
  }

  /** Not declared dead, and heard within the death bound. */
  private fresh(e: Entry, now: number): boolean {
    return !e.dead && now - e.at <= this.options.deadAfterMs;
  }

  /**
   * A process that shares no format with this one is named once (a log line): as a mismatch when its
   * heartbeat is believed, else as a claim refused (it is left out of `alive` either way).
   */
  private saidMismatch(id: string, role: string, beat: Heartbeat, proven: boolean, first: boolean): void {
    const { key: _k, roleKeys: _r, sig: _s, seq: _q, signKey: _g, roleSig: _p, ...info } = beat;
    if (this.believed({ proven, role })) {
      if (first) this.options.onMismatch?.({ ...info, roles: [role] }, role);
      return;
    }
    if (this.unprovenClaims.has(id)) return;
    if (this.unprovenClaims.size >= this.maxPeers) this.unprovenClaims.clear();
    this.unprovenClaims.add(id);
    const wire = beat.wire ?? FIRST_WIRE;
    this.options.onRefused?.(`${role} process ${beat.id} claims wire formats ${wire.oldest}-${wire.speaks}, none of which this one speaks, without proving its role (no signature by an anchored ${role} key): not named as a mismatch; nothing is routed to it`);
  }

  /** Live entries of one role; a role's dead ones are forgotten first when it is full. */
  private liveOf(role: string): number {
    let live = 0;
    for (const [id, e] of this.seen) {
      if (e.role !== role) continue;
      if (e.dead) this.seen.delete(id);
      else live++;
    }
    return live;
  }
}

function importSignKey(x: string): KeyObject | null {
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
  } catch {
    return null;
  }
}

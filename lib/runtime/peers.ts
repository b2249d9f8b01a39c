import { at } from '../../bus/exchange.js';
import { hear, tell } from '../../bus/verbs.js';
import { createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import type { Bus, Subscription } from '../../bus/bus.js';
import { FIRST_WIRE, processChannels, processSubjects, wireOverlaps, type Heartbeat, type ProcessInfo } from '../../bus/subjects.js';
import { heartbeatSigned as signed, isProven, roleSignature, unprovable, type RoleProof } from './heartbeat-proof.js';

export interface PeersOptions {
  intervalMs: number;
  /** A peer not heard for this long is dead (and reported once through `onDeath`). */
  deadAfterMs: number;
  /** A clock in ms whose differences are durations (default: monotonic, `performance.now()`). */
  now?: () => number;
  /** How many times the bus connection was lost so far (Bus.connectionLosses): see `mayBeDeclaredDead`. */
  connectionLosses?: () => number;
  /** This process's public key, announced with every heartbeat (bus/seal.ts). */
  key: string;
  /** The role keys this process opens requests to `role` with (empty: the role has none). */
  roleKeys?: (role: string) => string[];
  /**
   * The anchored role keys heartbeats are proven with (./heartbeat-proof.ts). Absent (the in-process
   * bus, where no other process is heard): every heartbeat is believed, as before proofs.
   */
  proof?: RoleProof;
  /**
   * At most this many live processes are kept per role (heartbeats are outside input): one role's
   * identity announcing thousands of processes cannot crowd out the processes of another role.
   */
  maxPeers?: number;
  /** A heartbeat was not believed (a second claimant of a live id, or one past the bound). */
  onRefused?: (why: string) => void;
  /** A process that shares no wire format with this one was heard: said once per process (a log line by name). */
  onMismatch?: (peer: ProcessInfo, role: string) => void;
}

interface Entry {
  beat: Heartbeat;
  role: string;
  at: number;
  dead: boolean;
  signKey: KeyObject;
  /** Its last heartbeat was signed by the role's anchored key (./heartbeat-proof.ts). */
  proven: boolean;
}

/** The wire format whose heartbeats may say `leaving` (a process of an earlier one would find its signature bad). */
export const LEAVING_WIRE = 2;

/**
 * Which Pier processes are alive, from the heartbeats every process publishes once per role on
 * that role's own subject (`pier.process.heartbeat.<role>`), which only the role's identity may
 * publish: a heartbeat counts for the role its subject names, whatever roles its body lists. Used to
 * know which edges a list must hear from, which callback replicas can take events, when an edge
 * died (its connections then need their `close`), and which keys secrets are sealed to.
 *
 * Each heartbeat is signed with a key pair the process made at start, and counts up: an id is bound
 * to the signing key it was first heard with for as long as it lives, and a heartbeat that is not
 * newer than the last one heard is a replay. So no other process, even one of the same role that
 * hears every heartbeat, can keep a dead process "alive" or take over its keys.
 *
 * What a heartbeat says of its wire formats holds others back only when proven (./heartbeat-proof.ts):
 * a goodbye is withheld, and a process named a mismatch, for a proven heartbeat alone.
 */
export class Peers {
  private readonly seen = new Map<string, Entry>();
  private readonly deathListeners = new Set<(peer: ProcessInfo) => void>();
  private readonly keyWaiters = new Set<() => void>();
  private sub: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly now: () => number;
  private readonly maxPeers: number;
  private readonly signing = generateKeyPairSync('ed25519');
  private readonly signKey = this.signing.publicKey.export({ format: 'jwk' }).x!;
  private seq = 0;
  private readonly ownBeats = new Map<string, Heartbeat>();
  /** Roles whose replicas were last seen announcing no key in common (said once, not per request). */
  private readonly disagreeing = new Set<string>();
  /** Processes whose unproven claim of a disjoint window was said (once each, as a mismatch is). */
  private readonly unprovenClaims = new Set<string>();
  /**
   * When this process last heard its own heartbeat come back from the bus. A process that cannot
   * hear itself (its NATS connection is down or re-connecting, or it was paused) hears nobody, and
   * the silence is its own, not its peers': it declares nobody dead meanwhile (see `checkDeaths`).
   */
  private lastOwnHeard: number;
  /** The bus's connection losses when it last heard itself (`mayBeDeclaredDead`). */
  private lossesWhenHeard = 0;

  constructor(
    private readonly bus: Bus,
    readonly self: ProcessInfo,
    private readonly options: PeersOptions,
  ) {
    // Liveness is a duration measured here, never a wall-clock reading: a clock stepped forward (NTP,
    // a VM resumed) must not make every peer, or this process itself, look silent for that long.
    this.now = options.now ?? (() => performance.now());
    this.maxPeers = options.maxPeers ?? 256;
    this.lastOwnHeard = this.now();
    this.lossesWhenHeard = options.connectionLosses?.() ?? 0;
  }

  /** Past this long without its own heartbeat back, the process counts itself cut off (never longer than half the death bound). */
  private get blindAfterMs(): number {
    return Math.min(3 * this.options.intervalMs, this.options.deadAfterMs / 2);
  }

  /** When `start` began listening to heartbeats (undefined before). */
  private listeningSince: number | undefined;

  start(): void {
    this.listeningSince = this.now();
    this.sub = hear(this.bus, at(processChannels.heartbeat, processSubjects.heartbeats), (beat, subject) => this.heard(subject.slice(subject.lastIndexOf('.') + 1), beat));
    const beat = () => {
      this.seq++;
      for (const role of this.self.roles) {
        try {
          tell(this.bus, at(processChannels.heartbeat, processSubjects.heartbeat(role)), this.beatFor(role));
        } catch {
          // Disconnected: peers will see the silence, which is the truth.
        }
      }
      this.checkDeaths();
    };
    beat();
    this.timer = setInterval(beat, this.options.intervalMs);
  }

  /**
   * Stops heartbeating. A process that announced itself says goodbye first (a last heartbeat,
   * signed, saying `leaving`), so its peers act on its end at once instead of after the death
   * bound: an edge sends the events a stopped callback replica left undelivered to another one
   * (docs/operations.md "Upgrading"). Withheld only while a proven live process speaks a wire format
   * without it: a thief announcing a 0.2 process holds back nobody's; a real 0.2 process refuses the
   * goodbye as badly signed and finds out by the silence, as before.
   */
  stop(): void {
    if (this.timer) {
      clearInterval(this.timer);
      this.sayGoodbye();
    }
    this.timer = null;
    this.sub?.unsubscribe();
    for (const wake of this.keyWaiters) wake();
  }

  private sayGoodbye(): void {
    const now = this.now();
    const older = [...this.seen.values()].some((e) => e.proven && !e.dead && now - e.at <= this.options.deadAfterMs && (e.beat.wire ?? FIRST_WIRE).speaks < LEAVING_WIRE);
    if (older || (this.self.wire ?? FIRST_WIRE).speaks < LEAVING_WIRE) return;
    this.seq++;
    for (const role of this.self.roles) {
      const body = { ...this.self, key: this.options.key, roleKeys: this.options.roleKeys?.(role) ?? [], seq: this.seq, signKey: this.signKey, leaving: true as const };
      try {
        tell(this.bus, at(processChannels.heartbeat, processSubjects.heartbeat(role)), this.signedBeat(role, body));
      } catch {
        // Disconnected: the peers find out by the silence.
      }
    }
  }

  /**
   * Live processes that share no wire format with this one (docs/operations.md "Upgrading"): heard,
   * named, and left out of `alive` (nothing is routed to them), never timed out against. Only as
   * their proven heartbeats say it (or, for a role nothing proves here, as they say it): one that
   * does not prove its role is not named, so a thief cannot fail the admin's /readyz with it.
   */
  mismatched(): ProcessInfo[] {
    const now = this.now();
    const out = new Map<string, ProcessInfo>();
    for (const e of this.seen.values()) {
      if (e.dead || now - e.at > this.options.deadAfterMs || this.speaksWith(e.beat) || !this.believed(e)) continue;
      const { key: _k, roleKeys: _r, sig: _s, seq: _q, signKey: _g, roleSig: _p, ...info } = e.beat;
      const known = out.get(info.id);
      out.set(info.id, known ? { ...known, roles: [...known.roles, e.role] } : info);
    }
    return [...out.values()];
  }

  private speaksWith(beat: Pick<ProcessInfo, 'wire'>): boolean {
    return wireOverlaps(beat.wire ?? FIRST_WIRE, this.self.wire ?? FIRST_WIRE);
  }

  /** Whether what a process's heartbeat claims about its formats is believed where it would hold others back. */
  private believed(e: Pick<Entry, 'proven' | 'role'>): boolean {
    return e.proven || unprovable(this.options.proof, e.role);
  }

  /** Live processes with `role` (this one included), as far as their role's own heartbeats tell. */
  alive(role: string): ProcessInfo[] {
    return this.aliveBeats(role).map(({ key: _k, roleKeys: _r, roleSig: _p, ...info }) => info);
  }

  /**
   * Whether every live `role` process (this one included) speaks wire format `wire` or later, as
   * their believed heartbeats say: what a writer of a record format only such a release reads waits
   * for (the vault's value keys, docs/vault.md "Destroyed"). A heartbeat not believed counts for
   * nothing either way: a thief of the role's identity neither holds the writer back nor lets it on.
   */
  allSpeak(role: string, wire: number): boolean {
    if (this.self.roles.includes(role) && (this.self.wire ?? FIRST_WIRE).speaks < wire) return false;
    const now = this.now();
    // Not before every live process had two beats to be heard, nor while this one hears nobody
    // (its silence would look like theirs).
    if (this.listeningSince === undefined || now - this.listeningSince < 2 * this.options.intervalMs) return false;
    if (this.self.roles.length > 0 && now - this.lastOwnHeard > this.blindAfterMs) return false;
    for (const e of this.seen.values()) {
      if (e.role !== role || e.dead || now - e.at > this.options.deadAfterMs || !this.speaksWith(e.beat) || !this.believed(e)) continue;
      if ((e.beat.wire ?? FIRST_WIRE).speaks < wire) return false;
    }
    return true;
  }

  onDeath(listener: (peer: ProcessInfo) => void): () => void {
    this.deathListeners.add(listener);
    return () => this.deathListeners.delete(listener);
  }

  /**
   * Which of the role's `anchored` keys to seal a request to `role` with: one every live replica
   * announces (so whichever the queue group picks opens it; during a master key rotation the old
   * one, until every replica has the new), in the anchors' order of preference. A key a heartbeat
   * announces that is not anchored counts for nothing (docs/security.md, "Keys with an anchor").
   * Null when no replica announcing an anchored key was heard, or they hold none in common.
   */
  recipientFor(role: string, anchored: readonly string[]): string | null {
    // A process running the role holds the real key (derived from the master key): its own.
    if (this.self.roles.includes(role)) return this.options.roleKeys?.(role).find((k) => anchored.includes(k)) ?? null;
    const held = this.aliveBeats(role)
      .map((b) => b.roleKeys.filter((k) => anchored.includes(k)))
      .filter((keys) => keys.length > 0);
    if (held.length === 0) return null;
    const everywhere = anchored.filter((k) => held.every((keys) => keys.includes(k)));
    if (everywhere.length === 0) {
      if (!this.disagreeing.has(role)) this.options.onRefused?.(`the ${role} replicas hold no anchored key in common (a master key rotation half done?): nothing is sealed to ${role} until they agree`);
      this.disagreeing.add(role);
      return null;
    }
    this.disagreeing.delete(role);
    return everywhere[0];
  }

  /** `recipientFor`, waiting up to `timeoutMs` for a first heartbeat of the role (a process that just started). */
  async recipientWithin(role: string, anchored: readonly string[], timeoutMs: number): Promise<string | null> {
    const end = this.now() + timeoutMs;
    for (let key = this.recipientFor(role, anchored); ; key = this.recipientFor(role, anchored)) {
      if (key !== null || this.now() >= end || this.disagreeing.has(role)) return key;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.keyWaiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.max(1, end - this.now()));
        this.keyWaiters.add(wake);
      });
    }
  }

  /** This process's signature (its heartbeat key) over `data`: for what it answers that others must trust. */
  sign(data: Buffer): string {
    return sign(null, data, this.signing.privateKey).toString('base64url');
  }

  /** Whether `sig` over `data` is by the live process `id` (this one included), as its heartbeats are. */
  signedBy(id: string, data: Buffer, sig: string): boolean {
    const key = id === this.self.id ? this.signing.publicKey : [...this.seen.values()].find((e) => !e.dead && e.beat.id === id)?.signKey;
    if (!key) return false;
    try {
      return verify(null, data, key, Buffer.from(sig, 'base64url'));
    } catch {
      return false;
    }
  }

  /** Whether `sig` over `data` is by the live `role` process with bus id `busId` (its heartbeat key). */
  signedByBus(busId: string, role: string, data: Buffer, sig: string, evenIfDeclaredDead = false): boolean {
    const entry = busId === this.self.busId && this.self.roles.includes(role) ? null : [...this.seen.values()].find((e) => (evenIfDeclaredDead || !e.dead) && e.role === role && e.beat.busId === busId);
    const key = entry === null ? this.signing.publicKey : entry?.signKey;
    if (!key) return false;
    try {
      return verify(null, data, key, Buffer.from(sig, 'base64url'));
    } catch {
      return false;
    }
  }

  /** This process's heartbeat for `role`, signed once per beat (reads of the directory use it too). */
  private beatFor(role: string): Heartbeat {
    const cached = this.ownBeats.get(role);
    if (cached && cached.seq === this.seq) return cached;
    const body = { ...this.self, key: this.options.key, roleKeys: this.options.roleKeys?.(role) ?? [], seq: this.seq, signKey: this.signKey };
    const beat = this.signedBeat(role, body);
    this.ownBeats.set(role, beat);
    return beat;
  }

  /** A heartbeat signed by this process's key (`sig`, what 0.2 checks) and, where it holds the role's anchored key, by that (`roleSig`). */
  private signedBeat(role: string, body: Omit<Heartbeat, 'sig' | 'roleSig'>): Heartbeat {
    const roleSig = roleSignature(this.options.proof, role, body);
    return { ...body, sig: sign(null, signed(role, body), this.signing.privateKey).toString('base64url'), ...(roleSig === undefined ? {} : { roleSig }) };
  }

  private aliveBeats(role: string): Heartbeat[] {
    const now = this.now();
    const others: Heartbeat[] = [];
    for (const e of this.seen.values()) if (e.role === role && !e.dead && now - e.at <= this.options.deadAfterMs && this.speaksWith(e.beat)) others.push(e.beat);
    return this.self.roles.includes(role) ? [this.beatFor(role), ...others] : others;
  }

  private heard(role: string, beat: Heartbeat): void {
    if (beat.id === this.self.id) {
      if (beat.signKey === this.signKey && beat.seq >= this.seq - 1 && verify(null, signed(role, beat), this.signing.publicKey, Buffer.from(beat.sig, 'base64url'))) this.heardSelf();
      return;
    }
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
      this.left(id, role, beat, signKey, proven);
      return;
    }
    // What the process says of its roles is kept as the one role its subject proves.
    this.seen.set(id, { beat: { ...beat, roles: [role] }, role, at: this.now(), dead: false, signKey, proven });
    if (!this.speaksWith(beat)) this.saidMismatch(id, role, beat, proven, !known || known.dead);
    if (!known || known.dead) for (const wake of [...this.keyWaiters]) wake();
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

  /** A process said goodbye: dead from now, its listeners run once (as after the death bound). */
  private left(id: string, role: string, beat: Heartbeat, signKey: KeyObject, proven: boolean): void {
    const known = this.seen.get(id);
    if (!known) return; // never heard alive: nothing to act on
    const { leaving: _l, ...rest } = beat;
    this.seen.set(id, { beat: { ...rest, roles: [role] }, role, at: this.now(), dead: true, signKey, proven });
    if (known.dead) return; // already declared dead: its listeners ran then
    const { key: _k, roleKeys: _r, roleSig: _p, ...info } = { ...rest, roles: [role] };
    for (const l of this.deathListeners) l(info);
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

  /**
   * Its own heartbeat came back. After a blackout, every peer it still counted alive gets a fresh
   * window from now: their silence meanwhile was this process's, and one that really died is
   * declared so one window after the blackout ended.
   */
  /**
   * Whether the other processes may have declared this one dead: it has not heard its own
   * heartbeat for nearly the death bound (paused, starved, or cut off from NATS), so its last one
   * may have reached them that long ago. Read synchronously, before acting on anything that came in
   * meanwhile: an edge then fences itself (its connections' closes may have been raised without it).
   */
  mayBeDeclaredDead(graceWhileConnectedMs = 0): boolean {
    // Still connected to NATS all along (no loss since it last heard itself): its subscriptions
    // stood, so a peer that asks before acting on its silence waited for its answer that much longer.
    const connected = this.options.connectionLosses !== undefined && this.options.connectionLosses() === this.lossesWhenHeard;
    const bound = this.options.deadAfterMs - this.options.intervalMs + (connected ? graceWhileConnectedMs : 0);
    return this.self.roles.length > 0 && this.now() - this.lastOwnHeard > bound;
  }

  private heardSelf(): void {
    const now = this.now();
    if (now - this.lastOwnHeard > this.blindAfterMs) for (const e of this.seen.values()) if (!e.dead) e.at = Math.max(e.at, now);
    this.lastOwnHeard = now;
    this.lossesWhenHeard = this.options.connectionLosses?.() ?? 0;
  }

  /**
   * Peers not heard for `deadAfterMs` are dead: their listeners run (an edge's connections get their
   * close). Not while this process cannot hear itself: a callback replica cut off from NATS for two
   * seconds, or paused, would otherwise find every edge silent on its return and close the live
   * connections of all of them.
   */
  private checkDeaths(): void {
    const now = this.now();
    // (A process with no role sends no heartbeat to hear: it has only its peers' to go by.)
    if (this.self.roles.length > 0 && now - this.lastOwnHeard > this.blindAfterMs) return;
    for (const [id, p] of this.seen) {
      if (!p.dead && now - p.at > this.options.deadAfterMs) {
        p.dead = true;
        const { key: _k, roleKeys: _r, roleSig: _p, ...info } = p.beat;
        for (const l of this.deathListeners) l(info);
      }
      // Forget it after a while; a process that comes back announces itself again.
      if (p.dead && now - p.at > this.options.deadAfterMs * 10) this.seen.delete(id);
    }
  }
}

function importSignKey(x: string): KeyObject | null {
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
  } catch {
    return null;
  }
}

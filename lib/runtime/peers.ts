import { at } from '../../bus/exchange.js';
import { hear, tell } from '../../bus/verbs.js';
import type { Bus, Subscription } from '../../bus/bus.js';
import { FIRST_WIRE, processChannels, processSubjects, type Heartbeat, type ProcessInfo } from '../../bus/subjects.js';
import type { RoleProof } from './heartbeat-proof.js';
import { expire, SelfHearing, withoutKeys } from './peers-expiry.js';
import { HeardPeers } from './peers-heard.js';
import { SealKeys } from './peers-keys.js';
import { LEAVING_WIRE, OwnBeats, signedWith } from './peers-own.js';

export { LEAVING_WIRE } from './peers-own.js';

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
 *
 * Its parts: this process's own heartbeats (./peers-own.ts), what the others' said (./peers-heard.ts),
 * how a peer's life ends, by goodbye or by silence (./peers-expiry.ts), and which keys requests are
 * sealed to (./peers-keys.ts).
 */
export class Peers {
  private readonly deathListeners = new Set<(peer: ProcessInfo) => void>();
  private sub: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly now: () => number;
  private readonly own: OwnBeats;
  private readonly others: HeardPeers;
  private readonly hearing: SelfHearing;
  private readonly keys: SealKeys;
  /** When `start` began listening to heartbeats (undefined before). */
  private listeningSince: number | undefined;

  constructor(
    private readonly bus: Bus,
    readonly self: ProcessInfo,
    private readonly options: PeersOptions,
  ) {
    // Liveness is a duration measured here, never a wall-clock reading: a clock stepped forward (NTP,
    // a VM resumed) must not make every peer, or this process itself, look silent for that long.
    this.now = options.now ?? (() => performance.now());
    this.own = new OwnBeats(self, options);
    this.keys = new SealKeys(self, options, this.now, (role) => this.aliveBeats(role));
    this.others = new HeardPeers(self, options, options.maxPeers ?? 256, this.now, { died: (peer) => this.died(peer), arrived: () => this.keys.arrived() });
    this.hearing = new SelfHearing(self, options, this.now);
  }

  start(): void {
    this.listeningSince = this.now();
    this.sub = hear(this.bus, at(processChannels.heartbeat, processSubjects.heartbeats), (beat, subject) => this.heard(subject.slice(subject.lastIndexOf('.') + 1), beat));
    const beat = () => {
      this.own.next();
      for (const role of this.self.roles) {
        try {
          tell(this.bus, at(processChannels.heartbeat, processSubjects.heartbeat(role)), this.own.beatFor(role));
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
    this.keys.stopped();
  }

  private sayGoodbye(): void {
    if (this.others.holdsGoodbyeBack() || (this.self.wire ?? FIRST_WIRE).speaks < LEAVING_WIRE) return;
    this.own.next();
    for (const role of this.self.roles) {
      try {
        tell(this.bus, at(processChannels.heartbeat, processSubjects.heartbeat(role)), this.own.goodbyeFor(role));
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
    return this.others.mismatched();
  }

  /** Live processes with `role` (this one included), as far as their role's own heartbeats tell. */
  alive(role: string): ProcessInfo[] {
    return this.aliveBeats(role).map((beat) => withoutKeys(beat));
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
    if (this.hearing.blind(now)) return false;
    return this.others.allSpeak(role, wire, now);
  }

  onDeath(listener: (peer: ProcessInfo) => void): () => void {
    this.deathListeners.add(listener);
    return () => this.deathListeners.delete(listener);
  }

  /** Which of the role's `anchored` keys to seal a request to `role` with (./peers-keys.ts); null when none. */
  recipientFor(role: string, anchored: readonly string[]): string | null {
    return this.keys.recipientFor(role, anchored);
  }

  /** `recipientFor`, waiting up to `timeoutMs` for a first heartbeat of the role (a process that just started). */
  recipientWithin(role: string, anchored: readonly string[], timeoutMs: number): Promise<string | null> {
    return this.keys.recipientWithin(role, anchored, timeoutMs);
  }

  /** This process's signature (its heartbeat key) over `data`: for what it answers that others must trust. */
  sign(data: Buffer): string {
    return this.own.sign(data);
  }

  /** Whether `sig` over `data` is by the live process `id` (this one included), as its heartbeats are. */
  signedBy(id: string, data: Buffer, sig: string): boolean {
    return signedWith(id === this.self.id ? this.own.publicKey : this.others.signKeyOf(id), data, sig);
  }

  /** Whether `sig` over `data` is by the live `role` process with bus id `busId` (its heartbeat key). */
  signedByBus(busId: string, role: string, data: Buffer, sig: string, evenIfDeclaredDead = false): boolean {
    const entry = busId === this.self.busId && this.self.roles.includes(role) ? null : this.others.onBus(busId, role, evenIfDeclaredDead);
    return signedWith(entry === null ? this.own.publicKey : entry?.signKey, data, sig);
  }

  /**
   * Whether the other processes may have declared this one dead: it has not heard its own
   * heartbeat for nearly the death bound (paused, starved, or cut off from NATS), so its last one
   * may have reached them that long ago. Read synchronously, before acting on anything that came in
   * meanwhile: an edge then fences itself (its connections' closes may have been raised without it).
   */
  mayBeDeclaredDead(graceWhileConnectedMs = 0): boolean {
    return this.hearing.mayBeDeclaredDead(graceWhileConnectedMs);
  }

  private aliveBeats(role: string): Heartbeat[] {
    const others = this.others.alive(role);
    return this.self.roles.includes(role) ? [this.own.beatFor(role), ...others] : others;
  }

  private heard(role: string, beat: Heartbeat): void {
    if (beat.id === this.self.id) {
      if (this.own.isOwn(role, beat)) this.hearing.heard(this.others.seen);
      return;
    }
    this.others.hear(role, beat);
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
    if (this.hearing.blind(now)) return;
    expire(this.others.seen, now, this.options.deadAfterMs, (peer) => this.died(peer));
  }

  /** A peer ended (its goodbye, or its silence past the death bound): every death listener hears of it. */
  private died(peer: ProcessInfo): void {
    for (const l of this.deathListeners) l(peer);
  }
}

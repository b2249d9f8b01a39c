import type { KeyObject } from 'node:crypto';
import type { Heartbeat, ProcessInfo } from '../../bus/subjects.js';

// How a peer's life ends (./peers.ts): by its goodbye, or by its silence past the death bound; and
// why a process that cannot hear itself declares nobody dead meanwhile.

/** What is known of one process on one role's subject, from its last heartbeat believed. */
export interface Entry {
  beat: Heartbeat;
  role: string;
  at: number;
  dead: boolean;
  signKey: KeyObject;
  /** Its last heartbeat was signed by the role's anchored key (./heartbeat-proof.ts). */
  proven: boolean;
}

/** A heartbeat as the process it describes, as death listeners and `alive` hand it on (without its keys). */
export const withoutKeys = ({ key: _k, roleKeys: _r, roleSig: _p, ...info }: Heartbeat): ProcessInfo => info;

/** A process said goodbye: dead from now, its listeners (`died`) run once (as after the death bound). */
export function saidGoodbye(seen: Map<string, Entry>, id: string, role: string, beat: Heartbeat, signKey: KeyObject, proven: boolean, now: () => number, died: (peer: ProcessInfo) => void): void {
  const known = seen.get(id);
  if (!known) return; // never heard alive: nothing to act on
  const { leaving: _l, ...rest } = beat;
  seen.set(id, { beat: { ...rest, roles: [role] }, role, at: now(), dead: true, signKey, proven });
  if (known.dead) return; // already declared dead: its listeners ran then
  died(withoutKeys({ ...rest, roles: [role] }));
}

/**
 * Peers not heard for `deadAfterMs` are dead: their listeners (`died`) run (an edge's connections get
 * their close). The caller holds this back while it cannot hear itself (`SelfHearing.blind`).
 */
export function expire(seen: Map<string, Entry>, now: number, deadAfterMs: number, died: (peer: ProcessInfo) => void): void {
  for (const [id, p] of seen) {
    if (!p.dead && now - p.at > deadAfterMs) {
      p.dead = true;
      died(withoutKeys(p.beat));
    }
    // Forget it after a while; a process that comes back announces itself again.
    if (p.dead && now - p.at > deadAfterMs * 10) seen.delete(id);
  }
}

/** The timing ./peers.ts PeersOptions gives. */
export interface SelfHearingOptions {
  intervalMs: number;
  deadAfterMs: number;
  connectionLosses?: () => number;
}

/**
 * When this process last heard its own heartbeat come back from the bus. A process that cannot
 * hear itself (its NATS connection is down or re-connecting, or it was paused) hears nobody, and
 * the silence is its own, not its peers': it declares nobody dead meanwhile (see `expire`).
 */
export class SelfHearing {
  private lastOwnHeard: number;
  /** The bus's connection losses when it last heard itself (`mayBeDeclaredDead`). */
  private lossesWhenHeard = 0;

  constructor(
    private readonly self: ProcessInfo,
    private readonly options: SelfHearingOptions,
    private readonly now: () => number,
  ) {
    this.lastOwnHeard = this.now();
    this.lossesWhenHeard = options.connectionLosses?.() ?? 0;
  }

  /** Past this long without its own heartbeat back, the process counts itself cut off (never longer than half the death bound). */
  private get blindAfterMs(): number {
    return Math.min(3 * this.options.intervalMs, this.options.deadAfterMs / 2);
  }

  /** Whether it is cut off as of `now`. (A process with no role sends no heartbeat to hear: it has only its peers' to go by.) */
  blind(now: number): boolean {
    return this.self.roles.length > 0 && now - this.lastOwnHeard > this.blindAfterMs;
  }

  /**
   * Its own heartbeat came back. After a blackout, every peer it still counted alive (in `seen`) gets
   * a fresh window from now: their silence meanwhile was this process's, and one that really died is
   * declared so one window after the blackout ended.
   */
  heard(seen: Map<string, Entry>): void {
    const now = this.now();
    if (now - this.lastOwnHeard > this.blindAfterMs) for (const e of seen.values()) if (!e.dead) e.at = Math.max(e.at, now);
    this.lastOwnHeard = now;
    this.lossesWhenHeard = this.options.connectionLosses?.() ?? 0;
  }

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
}

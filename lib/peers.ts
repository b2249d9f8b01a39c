import type { Bus, Subscription } from '../bus/bus.js';
import { onEvent, publishEvent } from '../bus/rpc.js';
import { processSubjects, type ProcessInfo } from '../bus/subjects.js';

export interface PeersOptions {
  intervalMs: number;
  /** A peer not heard for this long is dead (and reported once through `onDeath`). */
  deadAfterMs: number;
  now?: () => number;
}

/**
 * Which Pier processes are alive, from heartbeats every process publishes. Used to know which
 * edges a list must hear from, which callback replicas can take events, and when an edge died
 * (its connections then need their `close`).
 */
export class Peers {
  private readonly seen = new Map<string, { info: ProcessInfo; at: number; dead: boolean }>();
  private readonly deathListeners = new Set<(peer: ProcessInfo) => void>();
  private sub: Subscription | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly now: () => number;

  constructor(
    private readonly bus: Bus,
    readonly self: ProcessInfo,
    private readonly options: PeersOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.sub = onEvent(this.bus, processSubjects.heartbeat, (info) => {
      if (info.id === this.self.id) return;
      const known = this.seen.get(info.id);
      this.seen.set(info.id, { info, at: this.now(), dead: false });
      if (known?.dead) known.dead = false;
    });
    const beat = () => {
      try {
        publishEvent(this.bus, processSubjects.heartbeat, this.self);
      } catch {
        // Disconnected: peers will see the silence, which is the truth.
      }
      this.checkDeaths();
    };
    beat();
    this.timer = setInterval(beat, this.options.intervalMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.sub?.unsubscribe();
  }

  /** Live processes with `role` (this one included). */
  alive(role: string): ProcessInfo[] {
    const now = this.now();
    const others = [...this.seen.values()].filter((p) => !p.dead && now - p.at <= this.options.deadAfterMs && p.info.roles.includes(role)).map((p) => p.info);
    return this.self.roles.includes(role) ? [this.self, ...others] : others;
  }

  onDeath(listener: (peer: ProcessInfo) => void): () => void {
    this.deathListeners.add(listener);
    return () => this.deathListeners.delete(listener);
  }

  private checkDeaths(): void {
    const now = this.now();
    for (const [id, p] of this.seen) {
      if (p.dead || now - p.at <= this.options.deadAfterMs) continue;
      p.dead = true;
      for (const l of this.deathListeners) l(p.info);
      // Forget it after a while; a process that comes back announces itself again.
      if (now - p.at > this.options.deadAfterMs * 10) this.seen.delete(id);
    }
  }
}

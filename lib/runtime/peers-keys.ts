import type { Heartbeat, ProcessInfo } from '../../bus/subjects.js';

/** What ./peers.ts gives the choice of keys. */
export interface SealKeysOptions {
  /** The role keys this process opens requests to `role` with (empty: the role has none). */
  roleKeys?: (role: string) => string[];
  onRefused?: (why: string) => void;
}

/**
 * Which key a request to a role is sealed to (./peers.ts `recipientFor`), from the keys its live
 * replicas announce in their heartbeats, and the waits for a first one.
 */
export class SealKeys {
  /** Roles whose replicas were last seen announcing no key in common (said once, not per request). */
  private readonly disagreeing = new Set<string>();
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly self: ProcessInfo,
    private readonly options: SealKeysOptions,
    private readonly now: () => number,
    /** The heartbeats of the live `role` processes (this one included). */
    private readonly aliveBeats: (role: string) => Heartbeat[],
  ) {}

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
          this.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, Math.max(1, end - this.now()));
        this.waiters.add(wake);
      });
    }
  }

  /** A process was heard for the first time (or again after its death): the waits look again. */
  arrived(): void {
    for (const wake of [...this.waiters]) wake();
  }

  /** Peers stopped: no wait goes on. */
  stopped(): void {
    for (const wake of this.waiters) wake();
  }
}

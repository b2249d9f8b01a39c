import { PierError } from '../../bus/errors.js';
import { decrement, increment } from '../../lib/runtime/counts.js';

export interface CheckGateOptions {
  /** bcrypt checks one client address may have running at once (more wait: never refused for it). */
  maxRunningPerClient: number;
  /** Checks one (app key, address) pair may have waiting; past it, 429. */
  maxWaitingPerPair?: number;
  /** Checks running or waiting over all pairs; past it, 429. */
  maxInFlight?: number;
  /** The spacing of a pair's checks once it is over its failure limit (the slow lane). */
  slowMs: number;
  now?: () => number;
}

/**
 * Admits bcrypt checks of access requests (docs/security.md, "Brute force and lock-out"). Per
 * (app key, client address), the failures of the window plus the checks running stay under the
 * failure limit: N concurrent bad proofs get at most the limit's worth of bcrypt work at once. Past
 * the limit a pair is not refused but slowed: its checks run one at a time, at most one per
 * `slowMs`, in the order they came. On one host every app reaches Pier from the same address, and
 * a provider learns its callers' app keys: bad proofs sent under an app's key then make that app's
 * correct proof wait its turn, never answer 429. Running checks per address are bounded (the rest
 * wait), and waiting ones per pair and in all; only those bounds answer 429, and only a flood that
 * keeps them full reaches them.
 */
export class CheckGate {
  private readonly running = new Map<string, number>();
  private readonly runningPerClient = new Map<string, number>();
  private readonly waitingPerPair = new Map<string, number>();
  private readonly waiters = new Set<() => void>();
  /** When each slowed pair may start its next check. */
  private readonly nextSlot = new Map<string, number>();
  /** Checks running or waiting, over all pairs. */
  private inFlight = 0;
  private readonly now: () => number;

  constructor(private readonly o: CheckGateOptions) {
    this.now = o.now ?? Date.now;
  }

  /**
   * Waits for a place to check a proof of `pair` from `client`; resolves with the function that
   * gives it back. `failures()` is the pair's count in the current window, `slowed()` whether the
   * pair or the client is over its failure limit (then the slow lane).
   */
  async admit(pair: string, client: string, limit: number, failures: () => number, slowed: () => boolean, deadline = Infinity): Promise<() => void> {
    if (this.inFlight >= (this.o.maxInFlight ?? 4_096)) throw new PierError('RATE_LIMITED', 'too many proofs being checked; retry later');
    if ((this.waitingPerPair.get(pair) ?? 0) >= (this.o.maxWaitingPerPair ?? 64)) throw new PierError('RATE_LIMITED', 'too many proofs waiting for this app key; retry later');
    increment(this.waitingPerPair, pair);
    this.inFlight++;
    let admitted = false;
    try {
      for (;;) {
        // Nobody waits for the answer any more (the caller's deadline passed): no bcrypt for it, and
        // its place goes to one that is still awaited.
        if (this.now() >= deadline) throw new PierError('TIMEOUT', 'the proof waited past its deadline; retry later');
        const wait = Math.min(this.waitFor(pair, client, limit, failures, slowed), Math.max(1, deadline - this.now()));
        if (wait === 0) {
          increment(this.running, pair);
          increment(this.runningPerClient, client);
          admitted = true;
          return () => this.release(pair, client);
        }
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            this.waiters.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, wait === Infinity ? 1_000 : wait);
          this.waiters.add(wake);
        });
      }
    } finally {
      decrement(this.waitingPerPair, pair);
      if (!admitted) this.inFlight--;
    }
  }

  /** 0 when the check may start now (its slot taken), else how long to wait at most before looking again. */
  private waitFor(pair: string, client: string, limit: number, failures: () => number, slowed: () => boolean): number {
    if ((this.runningPerClient.get(client) ?? 0) >= this.o.maxRunningPerClient) return Infinity;
    const running = this.running.get(pair) ?? 0;
    if (!slowed() && failures() + running < limit) return 0;
    // The slow lane: one check of the pair at a time, spaced.
    if (running > 0) return Infinity;
    const now = this.now();
    const slot = this.nextSlot.get(pair) ?? 0;
    if (slot > now) return slot - now;
    if (this.nextSlot.size >= 100_000) this.forgetPastSlots(now);
    this.nextSlot.set(pair, now + this.o.slowMs);
    return 0;
  }

  private forgetPastSlots(now: number): void {
    for (const [pair, at] of this.nextSlot) if (at <= now) this.nextSlot.delete(pair);
  }

  private release(pair: string, client: string): void {
    decrement(this.running, pair);
    decrement(this.runningPerClient, client);
    this.inFlight--;
    // Every waiter looks again (they are bounded): one may take the place, the others wait on.
    for (const wake of [...this.waiters]) wake();
  }
}

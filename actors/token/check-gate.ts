import { PierError } from '../../bus/errors.js';
import { decrement, increment } from '../../lib/counts.js';

/**
 * Admits bcrypt checks of access requests. Per (app key, client address), the failures of the
 * window plus the checks running never exceed the failure limit: N concurrent bad proofs get at
 * most the limit's worth of bcrypt work, while a correct app's concurrent requests are queued
 * behind each other instead of refused (each that succeeds lets the next one in). Per client
 * address, at most `maxPerClient` checks run or wait at once (429 above), and at most `maxTotal`
 * over all addresses (many addresses, an IPv6 prefix, must not grow the queue without end).
 */
export class CheckGate {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();
  private readonly perClient = new Map<string, number>();
  private total = 0;

  constructor(
    private readonly maxPerClient: number,
    private readonly maxTotal = 4_096,
  ) {}

  /**
   * Waits for a place to check a proof of `pair` from `client`; resolves with the function that
   * gives it back. `failures()` is the pair's count in the current window, `limited()` whether the
   * pair or the client is over its limit (then 429).
   */
  async admit(pair: string, client: string, limit: number, failures: () => number, limited: () => boolean): Promise<() => void> {
    const held = this.perClient.get(client) ?? 0;
    if (held >= this.maxPerClient) throw new PierError('RATE_LIMITED', 'too many proofs being checked for this address; retry later');
    if (this.total >= this.maxTotal) throw new PierError('RATE_LIMITED', 'too many proofs being checked; retry later');
    increment(this.perClient, client);
    this.total++;
    try {
      for (;;) {
        if (limited()) throw new PierError('RATE_LIMITED', 'too many failed token requests; retry later');
        const running = this.running.get(pair) ?? 0;
        if (failures() + running < limit) {
          increment(this.running, pair);
          return () => this.release(pair, client);
        }
        await new Promise<void>((wake) => this.waiting.set(pair, [...(this.waiting.get(pair) ?? []), wake]));
      }
    } catch (err) {
      decrement(this.perClient, client);
      this.total--;
      throw err;
    }
  }

  private release(pair: string, client: string): void {
    decrement(this.running, pair);
    decrement(this.perClient, client);
    this.total--;
    // Every waiter looks again: one may take the place, the others wait on or, once the pair is
    // over its limit, leave with 429 (bounded by maxPerClient, so waking all is cheap).
    const queue = this.waiting.get(pair) ?? [];
    this.waiting.delete(pair);
    for (const wake of queue) wake();
  }
}

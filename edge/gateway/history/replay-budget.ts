/** Users whose replay budget this edge keeps: past it, the fullest buckets (those that replayed least lately) are forgotten. */
const MAX_USERS = 100_000;

/**
 * Recovery work per user on this edge (docs/protocol.md "History and recovery"): a bucket of
 * `perMinute` bytes refilled continuously. Each recovering upgrade is charged a fixed cost and the
 * most its replay may read before it is served, and given back what it did not read once that is
 * known (a browser gone meanwhile read as much), so a burst cannot pass before its charges land;
 * a recovering upgrade is refused while the bucket is at or below zero. A client reconnecting in
 * a loop costs its user at most `perMinute` a minute, whatever it asks.
 */
export class ReplayBudget {
  private readonly buckets = new Map<string, { level: number; at: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  private levelOf(user: string): number {
    const b = this.buckets.get(user);
    if (!b) return this.perMinute;
    return Math.min(this.perMinute, b.level + ((this.now() - b.at) * this.perMinute) / 60_000);
  }

  /** Whether the user may replay now; when not, in how many seconds. */
  allows(user: string): { ok: true } | { ok: false; retryAfterS: number } {
    const level = this.levelOf(user);
    if (level > 0) return { ok: true };
    return { ok: false, retryAfterS: Math.max(1, Math.ceil(((-level + 1) * 60) / this.perMinute)) };
  }

  /**
   * A recovering upgrade, charged before it is served: the store requests it makes whatever it asks
   * (a malformed or hopeless position included). A 256th of the budget, so at most 256 a minute.
   */
  chargeUpgrade(user: string): void {
    this.charge(user, Math.max(1, Math.floor(this.perMinute / 256)));
  }

  /** A recovery that `reserved` bytes were taken for read `read`: the rest is given back (or the excess charged). */
  settle(user: string, reserved: number, read: number): void {
    if (read > reserved) this.charge(user, read - reserved);
    else if (reserved > read && this.buckets.has(user)) {
      const level = Math.min(this.perMinute, this.levelOf(user) + (reserved - read));
      this.buckets.set(user, { level, at: this.now() });
    }
  }

  charge(user: string, bytes: number): void {
    if (bytes <= 0) return;
    const level = this.levelOf(user) - bytes;
    this.buckets.delete(user);
    this.buckets.set(user, { level, at: this.now() });
    if (this.buckets.size > MAX_USERS) {
      // The oldest charged first: their buckets have refilled the most.
      for (const [u] of this.buckets) {
        this.buckets.delete(u);
        if (this.buckets.size <= MAX_USERS * 0.9) break;
      }
    }
  }

  get size(): number {
    return this.buckets.size;
  }
}

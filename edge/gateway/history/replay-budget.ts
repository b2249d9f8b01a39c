/** Users whose replay budget this edge keeps: past it, the fullest buckets (those that replayed least lately) are forgotten. */
const MAX_USERS = 100_000;

/**
 * Replayed bytes per user on this edge (docs/protocol.md "History and recovery"): a bucket of
 * `perMinute` bytes refilled continuously. A replay is charged after it is read (its size is known
 * then), so one replay may take the bucket below zero; the next recovering upgrade is refused until
 * it is back above zero. A client reconnecting in a loop to replay the whole history costs its user
 * at most `perMinute` a minute, whatever it asks.
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

/**
 * Counts failures per key in fixed windows; a key over `limit` failures is blocked until its
 * window ends. Memory is bounded: at most `maxKeys` keys are tracked (oldest dropped first).
 */
export class FailureLimiter {
  private readonly windows = new Map<string, { start: number; failures: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly now: () => number,
    private readonly maxKeys = 100_000,
  ) {}

  blocked(key: string): boolean {
    const w = this.windows.get(key);
    if (!w) return false;
    if (this.now() - w.start >= this.windowMs) {
      this.windows.delete(key);
      return false;
    }
    return w.failures >= this.limit;
  }

  /** Failures of `key` in its current window. */
  count(key: string): number {
    const w = this.windows.get(key);
    return w && this.now() - w.start < this.windowMs ? w.failures : 0;
  }

  fail(key: string): void {
    const now = this.now();
    const w = this.windows.get(key);
    if (w && now - w.start < this.windowMs) {
      w.failures++;
      return;
    }
    this.windows.delete(key);
    if (this.windows.size >= this.maxKeys) this.windows.delete(this.windows.keys().next().value!);
    this.windows.set(key, { start: now, failures: 1 });
  }
}

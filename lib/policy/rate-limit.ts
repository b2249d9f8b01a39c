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

  /** Counts a failure of `key` now; `onCounted` (sharing it with other replicas) hears it while the key is not yet blocked. */
  fail(key: string): void {
    const failures = this.record(key, this.now());
    if (failures <= this.limit) this.onCounted?.(key, this.now());
  }

  /** Counts a failure of `key` that happened at `at` (another replica's); returns the window's failures. */
  record(key: string, at: number): number {
    // Another replica's clock may run ahead (or a message lie): a failure is never later than now.
    at = Math.min(at, this.now());
    if (this.now() - at >= this.windowMs) return 0;
    const w = this.windows.get(key);
    if (w && at - w.start < this.windowMs) {
      w.failures++;
      return w.failures;
    }
    this.windows.delete(key);
    if (this.windows.size >= this.maxKeys) this.windows.delete(this.windows.keys().next().value!);
    this.windows.set(key, { start: at, failures: 1 });
    return 1;
  }

  /** Set by whoever shares this limiter's failures (actors/token/shared-failures.ts). */
  onCounted: ((key: string, at: number) => void) | undefined;
}

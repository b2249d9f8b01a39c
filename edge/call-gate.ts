/**
 * Passes of the body-less checks of provider and vault calls, remembered so that an app calling
 * with the same access token many times a second costs one bus round trip per token, not one per
 * call. A pass only decides whether the edge reads the body: the actor checks everything again on
 * the call itself, so a pass remembered a little too long (an app uninstalled in the meantime)
 * costs a body read, never an access.
 */
export class PassedGates {
  private readonly passes = new Map<string, number>();

  constructor(
    /** Longest a pass is remembered, whatever its token's expiry. */
    private readonly memoryMs = 5_000,
    /** Bound on remembered passes (keys come from callers): past it, the oldest go. */
    private readonly maxEntries = 10_000,
  ) {}

  passed(key: string, now: number): boolean {
    const until = this.passes.get(key);
    if (until === undefined) return false;
    if (now < until) return true;
    this.passes.delete(key);
    return false;
  }

  remember(key: string, tokenUntil: number, now: number): void {
    if (this.passes.size >= this.maxEntries) this.passes.delete(this.passes.keys().next().value!);
    this.passes.set(key, Math.min(tokenUntil, now + this.memoryMs));
  }

  get size(): number {
    return this.passes.size;
  }
}

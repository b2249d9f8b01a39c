/**
 * Value keys kept on disk ahead of the writes that will seal under them, per scope (Values.prepare,
 * on stores that reserve keys in batches: JetStream). A create then waits for one quorum commit
 * (its secret) instead of two in a row (its value key, then its secret): the key is already
 * durable, committed beforehand with others in one wave (docs/performance.md "Vault writes").
 *
 * Only as many keys are kept ahead as the scope's writes use: about AHEAD_MS of its write rate in
 * the last second, at most MAX_AHEAD. A scope written now and then keeps none (its writes put their
 * own keys, as before), so a key reserved and never used (a stray, erased by the hourly sweep,
 * value-key-erasure.ts) is one of at most MAX_AHEAD left when a burst of writes stops. A key waits
 * at most MAX_AGE_MS for its write, far inside the sweep's margin (STRAY_MARGIN_MS), so the sweep
 * never takes a key a write is about to use.
 */

/** What the pool keeps of a key: the data key it is wrapped by, and when it was made (values.ts PreparedKey). */
export interface PoolKey {
  dataKey: Buffer;
  record: { at?: number };
}

/** Writes' worth of keys kept ahead: enough to cover a refill's quorum round trip at the current rate. */
const AHEAD_MS = 100;
const MAX_AHEAD = 64;
export const MAX_AGE_MS = 60_000;
/** Scopes with a pool at once (the least recently written goes first: its keys become strays). */
const MAX_SCOPES = 1_024;

interface ScopePool<K> {
  keys: K[];
  /** A refill in flight (one at a time per scope). */
  filling: Promise<void> | null;
  /** Takes in the current second, and in the one before: the scope's write rate. */
  windowStart: number;
  taken: number;
  lastRate: number;
}

export interface ValueKeyPoolDeps<K extends PoolKey> {
  /** A new key of `scope` wrapped by `dataKey` (not yet kept). */
  newKey: (scope: string, dataKey: Buffer) => K;
  /** Keeps `keys` durably, together (one wave of commits). */
  reserve: (keys: readonly K[]) => Promise<void>;
  now: () => number;
  /** A refill that failed: the writes meanwhile put their own keys; said once per failure. */
  onFillFailed: (err: unknown) => void;
}

export class ValueKeyPool<K extends PoolKey> {
  private readonly scopes = new Map<string, ScopePool<K>>();

  constructor(private readonly deps: ValueKeyPoolDeps<K>) {}

  /**
   * A key of `scope` under `dataKey`, durable already; undefined when none is ready (the write then
   * puts its own). Waits only for a refill already in flight, never starts one to wait for.
   */
  async take(scope: string, dataKey: Buffer): Promise<K | undefined> {
    const pool = this.poolOf(scope);
    const now = this.deps.now();
    this.count(pool, now);
    const fresh = (k: K) => k.dataKey.equals(dataKey) && (k.record.at ?? 0) > now - MAX_AGE_MS;
    // Keys of a data key since replaced, or kept too long, are left to the sweep.
    while (pool.keys.length > 0 && !fresh(pool.keys[0]!)) pool.keys.shift();
    this.refill(scope, pool, dataKey);
    const ready = pool.keys.shift();
    if (ready) return ready;
    if (!pool.filling) return undefined;
    await pool.filling;
    const k = pool.keys.shift();
    return k && fresh(k) ? k : undefined;
  }

  /** Keys held now, over every scope (for tests and metrics). */
  held(): number {
    let n = 0;
    for (const p of this.scopes.values()) n += p.keys.length;
    return n;
  }

  private poolOf(scope: string): ScopePool<K> {
    let pool = this.scopes.get(scope);
    if (pool) this.scopes.delete(scope); // the most recently written last
    else pool = { keys: [], filling: null, windowStart: this.deps.now(), taken: 0, lastRate: 0 };
    this.scopes.set(scope, pool);
    for (const oldest of this.scopes.keys()) {
      if (this.scopes.size <= MAX_SCOPES) break;
      this.scopes.delete(oldest);
    }
    return pool;
  }

  private count(pool: ScopePool<K>, now: number): void {
    if (now - pool.windowStart >= 1_000) {
      // A second with no take at all in between reads as no rate.
      pool.lastRate = now - pool.windowStart < 2_000 ? pool.taken : 0;
      pool.windowStart = now;
      pool.taken = 0;
    }
    pool.taken++;
  }

  /** Tops the pool up to the scope's rate's worth, one refill at a time, when it is half empty. */
  private refill(scope: string, pool: ScopePool<K>, dataKey: Buffer): void {
    const target = Math.min(MAX_AHEAD, Math.ceil((pool.lastRate * AHEAD_MS) / 1_000));
    if (pool.filling || target <= 1 || pool.keys.length * 2 > target) return;
    const keys = Array.from({ length: target - pool.keys.length }, () => this.deps.newKey(scope, dataKey));
    pool.filling = this.deps
      .reserve(keys)
      .then(
        () => void pool.keys.push(...keys),
        (err: unknown) => this.deps.onFillFailed(err),
      )
      .finally(() => (pool.filling = null));
  }
}

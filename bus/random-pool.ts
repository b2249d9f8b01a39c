import { randomBytes } from 'node:crypto';

/**
 * Random bytes for nonces and IVs, cut from a pool filled 4 KiB at a time: `randomBytes` per box was
 * a call into OpenSSL costing some 6 µs on this VM (docs/performance.md), paid by every sealed bus
 * request, history keep and vault write. Each byte is handed out once; a full pool is replaced,
 * never written again, so what was handed out stays as it was.
 */
const POOL_BYTES = 4096;
let pool = randomBytes(POOL_BYTES);
let at = 0;

/** `n` fresh random bytes (at most the pool's size): a view of the pool, never handed out again. */
export function pooledRandom(n: number): Buffer {
  if (n > POOL_BYTES) return randomBytes(n);
  if (at + n > POOL_BYTES) {
    pool = randomBytes(POOL_BYTES);
    at = 0;
  }
  const out = pool.subarray(at, at + n);
  at += n;
  return out;
}

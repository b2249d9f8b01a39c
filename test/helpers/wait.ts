import { patience } from './time.js';

/**
 * Polls `probe` until it returns something truthy and returns that, or fails after `timeoutMs`
 * with a message naming what was awaited. Every wait in a test has a deadline and says what it
 * waited for: a hang becomes a readable failure.
 */
export async function until<T>(what: string, probe: () => T | undefined | null | false | Promise<T | undefined | null | false>, idleMs = 10_000, everyMs = 25): Promise<T> {
  const timeoutMs = patience(idleMs);
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** `promise`, or a failure naming `what` once `timeoutMs` has passed. */
export function within<T>(what: string, promise: Promise<T>, idleMs = 10_000): Promise<T> {
  const timeoutMs = patience(idleMs);
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Retry pacing shared by every client: exponential, capped, with full jitter (no thundering herd). */
export interface BackoffOptions {
  /** First delay's ceiling, in ms. */
  baseMs?: number;
  /** Largest delay, in ms. */
  maxMs?: number;
}

/** Delay before retry number `attempt` (0 for the first retry): uniform in [0, min(max, base·2^attempt)]. */
export function backoffDelay(attempt: number, { baseMs = 250, maxMs = 10_000 }: BackoffOptions = {}): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(Math.random() * ceiling);
}

/** Waits `ms`; rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

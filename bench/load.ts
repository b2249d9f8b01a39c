import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

export interface LatencySummary {
  requests: number;
  errors: number;
  /** Answers by HTTP status (fixed-rate runs). */
  statuses?: Record<string, number>;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
}

export const round = (n: number, digits = 3) => Math.round(n * 10 ** digits) / 10 ** digits;

export function summarise(latencies: number[], errors: number): LatencySummary {
  const s = [...latencies].sort((a, b) => a - b);
  const at = (p: number) => round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN);
  return { requests: s.length, errors, p50_ms: at(50), p90_ms: at(90), p99_ms: at(99) };
}

export interface Target {
  origin: string;
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body: Buffer | null;
}

/** How busy this (load generator) process's event loop was: near 1 means it was the bottleneck. */
export function measureUtilisation<T>(fn: () => Promise<T>): Promise<{ result: T; loadgen_event_loop_utilisation: number }> {
  const start = performance.eventLoopUtilization();
  return fn().then((result) => ({ result, loadgen_event_loop_utilisation: round(performance.eventLoopUtilization(start).utilization) }));
}

/** Open loop: `rate` requests a second for `seconds`, whatever the answers' speed. */
export async function fixedRate(target: Target, rate: number, seconds: number, expectStatus = 200): Promise<LatencySummary> {
  const pool = new Pool(target.origin, { connections: 256, pipelining: 1 });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  const pending: Promise<void>[] = [];
  const total = rate * seconds;
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    pending.push(
      pool
        .request({ path: target.path, method: target.method, headers: target.headers, body: target.body })
        .then(async (res) => {
          await res.body.arrayBuffer();
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          if (res.statusCode === expectStatus) latencies.push(performance.now() - t0);
          else errors++;
        })
        .catch(() => {
          errors++;
        }),
    );
  }
  await Promise.all(pending);
  await pool.close();
  return { ...summarise(latencies, errors), statuses };
}

/**
 * Closed loop: `concurrency` clients back to back for `seconds`; requests per second and latency.
 * `body` may vary per request (e.g. a new secret name each time).
 */
export async function maxRate(
  target: Target,
  concurrency: number,
  seconds: number,
  bodyOf?: (i: number) => Buffer,
): Promise<{ rps: number; errors: number } & LatencySummary> {
  const pool = new Pool(target.origin, { connections: concurrency, pipelining: 1 });
  const latencies: number[] = [];
  let errors = 0;
  let n = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        try {
          const res = await pool.request({ path: target.path, method: target.method, headers: target.headers, body: bodyOf ? bodyOf(n++) : target.body });
          await res.body.arrayBuffer();
          if (res.statusCode === 200) latencies.push(performance.now() - t0);
          else errors++;
        } catch {
          errors++;
        }
      }
    }),
  );
  await pool.close();
  return { rps: Math.round(latencies.length / seconds), ...summarise(latencies, errors) };
}

/**
 * The sender of a broadcast: `concurrency` clients posting `body` to `path` back to back while a
 * drive lasts; what was not answered 200 is counted.
 */
export function postLoop(pool: Pool, path: string, headers: Record<string, string>, body: string, concurrency = 8): { drive(ms: number): Promise<unknown>; errors(): number } {
  let errors = 0;
  const drive = (ms: number) => {
    const end = performance.now() + ms;
    return Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          try {
            const r = await pool.request({ path, method: 'POST', headers, body });
            await r.body.dump();
            if (r.statusCode !== 200) errors++;
          } catch {
            errors++;
          }
        }
      }),
    );
  };
  return { drive, errors: () => errors };
}

import { availableParallelism } from 'node:os';

/** The V8 flag that keeps garbage collection on the main thread (no parallel or concurrent helpers). */
export const SINGLE_THREADED_GC = '--single-threaded-gc';

/**
 * What to tell the operator when this process may run on one CPU only (its affinity, a cpuset) and
 * node was started without SINGLE_THREADED_GC: V8's GC helper threads then take the same core from
 * the main thread, and whoever waits on a collection waits a whole scheduler slice for them. With
 * 1,000 WebSocket round trips a second on one core, that was the difference between a p99 of
 * 21-25 ms and 6-7 ms (docs/performance.md). The flag cannot be set once V8 runs (V8 aborts if
 * marking is under way), so it is a hint for the command line, never applied here. Null: nothing to say.
 */
export function gcThreadsHint(cpus: number = availableParallelism(), execArgv: readonly string[] = process.execArgv): string | null {
  if (cpus > 1 || execArgv.includes(SINGLE_THREADED_GC)) return null;
  return `this process may use one CPU only: start node with ${SINGLE_THREADED_GC} (node ${SINGLE_THREADED_GC} bin/pier.js start) so that garbage collection does not wait for helper threads on the same core (docs/operations.md, "One CPU per process")`;
}

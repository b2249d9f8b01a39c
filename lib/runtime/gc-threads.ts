import { availableParallelism } from 'node:os';

/** The V8 flag that keeps garbage collection on the main thread (no parallel or concurrent helpers). */
export const SINGLE_THREADED_GC = '--single-threaded-gc';

/**
 * What to tell the operator when an edge process may run on one CPU only (its affinity, a cpuset)
 * and node was started without SINGLE_THREADED_GC: V8's GC helper threads then take the same core
 * from the main thread, and whoever waits on a collection waits a whole scheduler slice for them.
 * With 1,000 WebSocket round trips a second on one core that was a p99 of 20-36 ms against 6-8 ms
 * with the flag (docs/performance.md). Only edges are told: for actors that mostly wait on NATS
 * (JetStream writes) the helpers mark while the main thread waits, and the flag cost a quarter of
 * their throughput. The flag cannot be set once V8 runs (V8 aborts if marking is under way), so it
 * is a hint for the command line, never applied here. Null: nothing to say.
 */
export function gcThreadsHint(roles: readonly string[], cpus: number = availableParallelism(), execArgv: readonly string[] = process.execArgv): string | null {
  if (!roles.includes('edge') || cpus > 1 || execArgv.includes(SINGLE_THREADED_GC)) return null;
  return `this edge may use one CPU only: start node with ${SINGLE_THREADED_GC} (node ${SINGLE_THREADED_GC} bin/pier.js start) so that garbage collection does not wait for helper threads on the same core (docs/operations.md, "One CPU per process")`;
}

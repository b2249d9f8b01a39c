import { ask, serve } from '../bus/verbs.js';
import { MemoryBus } from '../bus/bus-memory.js';
import { vault } from '../bus/subjects.js';

/** Wildcard subscriptions beside the endpoint, as a process running every role holds a few dozen. */
const WILDCARDS = 30;

/** CPU µs per call of `calls` round trips, `callers` at a time. */
async function cpuPerCall(bus: MemoryBus, calls: number, callers: number): Promise<number> {
  const req = { op: 'RetrieveSecret', workspace: 'chat', userToken: `pier_${'x'.repeat(40)}`, accessToken: 'y'.repeat(300) };
  let left = calls;
  const before = process.cpuUsage();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (left-- > 0) await ask(bus, vault.authorize, req);
    }),
  );
  const used = process.cpuUsage(before);
  return Math.round(((used.user + used.system) / calls) * 10) / 10;
}

/**
 * One request/reply round trip on the in-process bus (`call` to `serve`, a `vault.authorize`-sized
 * request), in this process alone (the load core): the cost every edge↔actor hop of the one-process
 * Pier pays, without HTTP or an actor's work. No floor: it is a part of Pier's cost, not a job.
 */
export async function benchBus(): Promise<Record<string, unknown>> {
  const bus = new MemoryBus();
  for (let i = 0; i < WILDCARDS; i++) bus.subscribe(`pier.bench${i}.*.>`, () => undefined);
  serve(bus, vault.authorize, () => ({ until: Date.now() + 60_000 }));
  try {
    await cpuPerCall(bus, 20_000, 32); // warm-up: JIT
    return {
      shape: `MemoryBus call round trip, ${WILDCARDS} wildcard subscriptions beside it, a vault.authorize-sized request`,
      call_round_trip_cpu_us: { callers_32: await cpuPerCall(bus, 300_000, 32), callers_1: await cpuPerCall(bus, 300_000, 1) },
    };
  } finally {
    await bus.close();
  }
}

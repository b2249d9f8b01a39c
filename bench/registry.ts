import { ask } from '../bus/verbs.js';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { NatsBus } from '../bus/bus-nats.js';
import { registry } from '../bus/subjects.js';
import { startRegistry } from '../actors/registry/index.js';
import { loadConfig } from '../lib/config/config.js';
import { createLogger } from '../lib/runtime/log.js';
import { Metrics } from '../lib/runtime/metrics.js';
import { RegistryCache } from '../lib/state/registry-cache.js';
import { NatsServer } from '../test/helpers/nats-server.js';
import { cleanup, tempDir } from '../test/helpers/pier.js';
import { pinServer } from './pinning.js';

const silent = createLogger({ level: 'silent', name: 'bench', destination: new Writable({ write: (_c, _e, cb) => cb() }) });

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const round = (n: number) => Math.round(n * 1000) / 1000;

/**
 * The registry over real NATS: durable writes through the bus, token checks in an edge's cache,
 * and how long a revocation takes to reach two caches on other connections (contract: within 1 s).
 */
export async function benchRegistry(): Promise<Record<string, unknown>> {
  const nats = await NatsServer.start();
  pinServer(nats.pid);
  const dir = tempDir('pier-bench-');
  const config = loadConfig({ PIER_DATA_DIR: dir, PIER_MASTER_KEY: randomBytes(32).toString('hex'), NATS_URL: nats.url, PIER_ROLES: 'registry' });
  const actorBus = await NatsBus.connect({ url: nats.url, name: 'bench-registry' });
  const reg = await startRegistry({ bus: actorBus, config, log: silent, metrics: new Metrics('bench'), now: Date.now });
  const buses = await Promise.all([0, 1, 2].map((i) => NatsBus.connect({ url: nats.url, name: `bench-edge-${i}` })));
  const caches = buses.slice(1).map((b) => new RegistryCache(b, { maxStalenessMs: 5_000, log: silent, metrics: new Metrics('bench') }));
  caches.forEach((c) => c.start());
  await Promise.all(caches.map((c) => c.ready()));
  const client = buses[0];
  try {
    // 1. Durable writes (user add = one LMDB transaction + change event) with 16 in flight.
    const writes = 2_000;
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < writes) await ask(client, registry.userAdd, { name: `u${next++}` });
      }),
    );
    const writeSeconds = (performance.now() - t0) / 1000;

    // 2. Token checks against a warm cache (the edge's hot path: one SHA-256 and two map lookups).
    const { token } = await ask(client, registry.userToken, { name: 'u1' });
    while (caches[0].userForToken(token) === undefined) await new Promise((r) => setTimeout(r, 1));
    const checks = 500_000;
    const t1 = performance.now();
    for (let i = 0; i < checks; i++) caches[0].userForToken(token);
    const checkSeconds = (performance.now() - t1) / 1000;

    // 3. Revocation propagation to both caches.
    const delays: number[] = [];
    for (let i = 0; i < 50; i++) {
      const name = `u${i + 100}`;
      const issued = await ask(client, registry.userToken, { name });
      while (caches.some((c) => c.userForToken(issued.token) === undefined)) await new Promise((r) => setImmediate(r));
      const start = performance.now();
      await ask(client, registry.userRevoke, { name });
      while (caches.some((c) => c.userForToken(issued.token) !== undefined)) await new Promise((r) => setImmediate(r));
      delays.push(performance.now() - start);
    }
    delays.sort((a, b) => a - b);
    return {
      durable_user_writes_per_s: Math.round(writes / writeSeconds),
      cache_token_checks_per_s: Math.round(checks / checkSeconds),
      revocation_to_two_caches_ms: { p50: round(percentile(delays, 50)), p99: round(percentile(delays, 99)), max: round(delays.at(-1)!), samples: delays.length },
    };
  } finally {
    caches.forEach((c) => c.stop());
    await Promise.all(buses.map((b) => b.close()));
    await reg.stop();
    await actorBus.close();
    await nats.stop();
    cleanup(dir);
  }
}

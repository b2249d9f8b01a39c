import { connect, StorageType } from 'nats';
import { round } from './load.js';
import { cpuSeconds } from './goals.js';

const CLIENTS = 32;
const SECONDS = 4;
const VALUE = new Uint8Array(1024);

/** Publishes of 1 KiB from CLIENTS back to back, spread over `streams` streams of 3 copies: what the cluster acknowledges a second. */
async function publishRate(servers: string[], streams: number, pids: number[]): Promise<{ msgs_per_s: number; p50_ms: number; nats_cpu_us_per_msg?: number }> {
  const nc = await connect({ servers });
  const manager = await nc.jetstreamManager();
  const names = Array.from({ length: streams }, (_, i) => `BENCH_FLOOR_${streams}_${i}`);
  try {
    for (const [i, name] of names.entries()) await manager.streams.add({ name, subjects: [`bench.floor.${streams}.${i}.>`], num_replicas: 3, storage: StorageType.File });
    const js = nc.jetstream();
    const subject = (client: number) => `bench.floor.${streams}.${client % streams}.${client}`;
    // Warm: each stream's leader elected and its first blocks made.
    for (let i = 0; i < 4 * streams; i++) await js.publish(subject(i), VALUE);
    const took: number[] = [];
    const cpu = () => pids.reduce((sum, p) => sum + cpuSeconds(p), 0);
    const cpuBefore = cpu();
    const end = performance.now() + SECONDS * 1000;
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, client) => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await js.publish(subject(client), VALUE);
          took.push(performance.now() - t0);
        }
      }),
    );
    const cpuUsed = cpu() - cpuBefore;
    took.sort((a, b) => a - b);
    const cpuPerMsg = pids.length > 0 ? { nats_cpu_us_per_msg: round((cpuUsed * 1e6) / Math.max(1, took.length), 1) } : {};
    return { msgs_per_s: Math.round(took.length / SECONDS), p50_ms: round(took[took.length >> 1] ?? 0, 2), ...cpuPerMsg };
  } finally {
    for (const name of names) await manager.streams.delete(name).catch(() => undefined);
    await nc.close();
  }
}

/**
 * The floor under every quorum write on this cluster: bare JetStream publishes, no Pier. With
 * `sync_interval: always` a stream's Raft group syncs each append before the next, so one stream
 * tops out at a rate more clients do not raise; separate streams sync side by side. A vault create
 * is at least two messages in two streams (its value key, its secret; docs/vault.md "Destroyed").
 */
export async function jetStreamPublishFloor(servers: string[], pids: number[] = []): Promise<Record<string, unknown>> {
  // `pids`: the nodes' processes, whose CPU per acknowledged message is said beside the rate (what one quorum write costs the server core).
  const one = await publishRate(servers, 1, pids);
  const three = await publishRate(servers, 3, pids);
  return {
    clients: CLIENTS,
    one_stream: one,
    three_streams: three,
    note: 'bare nats.js publishes of 1 KiB to streams of 3 copies on the same cluster, acknowledged after each node synced (the Pier runs above share the server core with the nodes; this does not)',
  };
}

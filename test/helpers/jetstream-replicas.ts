import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type JetStreamClient, type JetStreamManager, type NatsConnection } from 'nats';
import { NatsServer, startJetStreamCluster } from './nats-server.js';

/**
 * Replicas of a store on JetStream, each on its own connection to its own node (one "host" each),
 * no shared disk: `nodes` 1 (R1) or 3 (a cluster, R3). `open(js, manager, replicas)` makes one replica.
 */
export async function jetStreamReplicas<S extends { close(): Promise<void> }>(
  nodes: 1 | 3,
  open: (js: JetStreamClient, manager: () => Promise<JetStreamManager>, replicas: number) => Promise<S>,
): Promise<{ a: S; b: S; another(): Promise<S>; close(): Promise<void>; storeDir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'pier-js-replicas-'));
  const servers = nodes === 1 ? [await NatsServer.start(['-js', '-sd', join(dir, 'js')])] : await startJetStreamCluster(dir, 3);
  const conns: NatsConnection[] = [];
  const stores: S[] = [];
  const replica = async (i: number) => {
    const nc = await connect({ servers: servers[i % servers.length].url });
    conns.push(nc);
    const s = await open(nc.jetstream(), () => nc.jetstreamManager(), nodes);
    stores.push(s);
    return s;
  };
  const closeAll = async () => {
    await Promise.all(stores.map((s) => s.close().catch(() => undefined)));
    await Promise.all(conns.map((c) => c.close()));
    await Promise.all(servers.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  let a: S;
  let b: S;
  try {
    a = await replica(0);
    b = await replica(1);
  } catch (err) {
    // Left open, the servers and connections keep the test's worker alive: the whole run hangs.
    await closeAll();
    throw err;
  }
  return {
    a,
    b,
    /** The nodes' JetStream store directories (under it, one per node), to read raw. */
    storeDir: dir,
    another: () => replica(2),
    close: closeAll,
  };
}

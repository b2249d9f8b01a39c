import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { JetStreamRegistryStore } from '../../actors/registry/store-jetstream.js';
import { startJetStreamCluster } from '../helpers/nats-server.js';
import { registryStoreSuite } from './registry-store-suite.js';

// JetStream on a 3-node cluster (R3): replicas on different "hosts", each connected to its own node.
registryStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-registry-js-'));
  const nodes = await startJetStreamCluster(dir, 3);
  const conns: NatsConnection[] = [];
  const open = async (node: number) => {
    const nc = await connect({ servers: nodes[node].url });
    conns.push(nc);
    return JetStreamRegistryStore.open(nc.jetstream(), () => nc.jetstreamManager(), { replicas: 3 });
  };
  const a = await open(0);
  const b = await open(1);
  return {
    a,
    b,
    another: () => open(2),
    close: async () => {
      await a.close();
      await b.close();
      await Promise.all(conns.map((c) => c.close()));
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

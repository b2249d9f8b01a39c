import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { startJetStreamCluster } from '../helpers/nats-server.js';
import { vaultStoreSuite } from './vault-store-suite.js';

// JetStream on a 3-node cluster (R3): two replicas on different "hosts" (each connected to its own
// node), no shared disk. The Debian nats-server 2.9.10 does not serialise check-and-set across a
// clustered stream's in-flight writes (nats-server #4320); the store decides conflicts itself in
// stream order, and this suite holds it to exactly one winner.
vaultStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vault-js-'));
  const nodes = await startJetStreamCluster(dir, 3);
  const conns: NatsConnection[] = [];
  const open = async (node: number) => {
    const nc = await connect({ servers: nodes[node % nodes.length].url });
    conns.push(nc);
    return JetStreamVaultStore.open(nc.jetstream(), () => nc.jetstreamManager(), { replicas: 3, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 });
  };
  const a = await open(0);
  const b = await open(1);
  return {
    a,
    b,
    close: async () => {
      await a.close();
      await b.close();
      await Promise.all(conns.map((c) => c.close()));
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

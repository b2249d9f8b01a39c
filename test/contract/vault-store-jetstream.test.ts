import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { NatsServer } from '../helpers/nats-server.js';
import { vaultStoreSuite } from './vault-store-suite.js';

// JetStream on one node (R1): two replicas, each with its own connection, no shared disk.
vaultStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vault-js-'));
  const nodes = [await NatsServer.start(['-js', '-sd', join(dir, 'js')])];
  const conns: NatsConnection[] = [];
  const open = async (node: number) => {
    const nc = await connect({ servers: nodes[node % nodes.length].url });
    conns.push(nc);
    return JetStreamVaultStore.open(nc.jetstream(), () => nc.jetstreamManager(), { replicas: 1, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 });
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

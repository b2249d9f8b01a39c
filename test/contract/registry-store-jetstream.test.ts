import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { JetStreamRegistryStore } from '../../actors/registry/store-jetstream.js';
import { NatsServer } from '../helpers/nats-server.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { encode } from '../../bus/codec.js';
import { registryState } from '../../bus/subjects.js';
import { registryStoreSuite } from './registry-store-suite.js';

// JetStream on a 3-node cluster (R3): replicas on different "hosts", each connected to its own node.
registryStoreSuite(test, () => jetStreamReplicas(3, (js, manager, replicas) => JetStreamRegistryStore.open(js, manager, { replicas })));

test('hostile: garbage and forged entries on the log are never applied; the next write still gets the next revision', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-registry-js-h-'));
  const node = await NatsServer.start(['-js', '-sd', join(dir, 'js')]);
  const nc = await connect({ servers: node.url });
  try {
    const store = await JetStreamRegistryStore.open(nc.jetstream(), () => nc.jetstreamManager(), { replicas: 1 });
    await store.write((w) => w.putUser({ name: 'alice', createdAt: 't' }));
    const js = nc.jetstream();
    // Garbage, a wrong shape, and a well-formed entry naming a revision that is not the current one.
    await js.publish(registryState.subject, new Uint8Array([0xc1, 0xff]));
    await js.publish(registryState.subject, encode({ hello: 'world' }));
    await js.publish(registryState.subject, encode({ expected: 99, changes: [{ kind: 'user', op: 'put', value: { name: 'mallory', createdAt: 't' } }] }));
    const { event } = await store.write((w) => w.putUser({ name: 'bob', createdAt: 't' }));
    t.is(event?.revision, 2);
    t.deepEqual(store.listUsers().map((u) => u.name), ['alice', 'bob']);
    await store.close();
  } finally {
    await nc.close();
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

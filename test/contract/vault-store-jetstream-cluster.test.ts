import test from 'ava';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { vaultStoreSuite } from './vault-store-suite.js';
import { within } from '../helpers/wait.js';

// JetStream on a 3-node cluster (R3): two replicas on different "hosts" (each connected to its own
// node), no shared disk. The Debian nats-server 2.9.10 does not serialise check-and-set across a
// clustered stream's in-flight writes (nats-server #4320); the store decides conflicts itself in
// stream order, and this suite holds it to exactly one winner. Here the replicas tell each other
// where their writes are (as the vault actor does over the bus), so reads never ask the stream;
// on one node (vault-store-jetstream) they do.
const replicas: JetStreamVaultStore[] = [];
vaultStoreSuite(test, () =>
  jetStreamReplicas(3, async (js, manager, n) => {
    const store = await JetStreamVaultStore.open(js, manager, {
      replicas: n,
      auditMaxAgeMs: 86_400_000,
      auditMaxEntries: 10_000,
      announce: (mark) => replicas.forEach((r) => r.heard(mark)),
    });
    replicas.push(store);
    return store;
  }),
);

test('hostile: a mark no write ever reached costs one bounded wait, not one per read', async (t) => {
  const pair = await jetStreamReplicas(1, (js, manager, n) => JetStreamVaultStore.open(js, manager, { replicas: n, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000, announce: () => undefined }));
  try {
    await pair.a.write((w) => w.putSecret('s\u0000k', { sealed: Buffer.from('v'), version: 1, createdAt: 't', createdBy: 'x', updatedAt: 't', updatedBy: 'x', history: [] }));
    pair.a.heard({ keys: 1e12, secrets: 1e12 });
    await within('the first read after the forged mark (one bounded wait)', pair.a.sync());
    // Later reads do not wait at all: sync() settles before the next turn of the event loop.
    const next = await Promise.race([pair.a.sync().then(() => 'read at once'), new Promise((r) => setImmediate(() => r('waited')))]);
    t.is(next, 'read at once');
    t.is(Buffer.from(pair.a.secret('s\u0000k')!.sealed).toString(), 'v');
  } finally {
    await pair.close();
  }
});

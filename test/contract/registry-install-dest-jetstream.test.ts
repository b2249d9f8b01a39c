import test from 'ava';
import { randomBytes } from 'node:crypto';
import { JetStreamRegistryStore } from '../../actors/registry/store-jetstream.js';
import { Keyring } from '../../lib/crypto/keyring.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { concurrentNestedInstalls, depsOf } from '../helpers/registry-installs.js';

// The nesting-dest check (docs/protocol.md "Upload") runs inside the registry's write, as "already
// installed" does: on JetStream a write made on a stale view is refused and run again on the
// fresh one, so two replicas cannot both accept nesting installs. (LMDB: test/unit/registry/install-dest.test.ts.)
test('concurrent nested installs over two JetStream registry replicas: exactly one wins', async (t) => {
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamRegistryStore.open(js, manager, { replicas }));
  t.teardown(() => pair.close());
  const keyring = new Keyring(randomBytes(32));
  await concurrentNestedInstalls(t, depsOf(pair.a, keyring), depsOf(pair.b, keyring));
});

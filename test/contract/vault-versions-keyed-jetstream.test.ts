import test from 'ava';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// The versions suite on JetStream (one node, R1) with every new value sealed under a value key of
// its own (docs/vault.md "Destroyed"): a destroy erases the key's message from its stream too.
vaultVersionsSuite(
  test,
  async () => {
    const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 }));
    return {
      store: pair.a,
      erases: true,
      another: () => pair.another(),
      files: () => (readdirSync(pair.storeDir, { recursive: true }) as string[]).map((f) => join(pair.storeDir, f)).filter((f) => statSync(f).isFile()),
      close: () => pair.close(),
    };
  },
  { keyed: true },
);

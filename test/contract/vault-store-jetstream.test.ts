import test from 'ava';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { vaultStoreSuite } from './vault-store-suite.js';

// JetStream on one node (R1): two replicas, each with its own connection, no shared disk.
vaultStoreSuite(test, () => jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 })));

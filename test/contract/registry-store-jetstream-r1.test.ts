import test from 'ava';
import { JetStreamRegistryStore } from '../../actors/registry/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { registryStoreSuite } from './registry-store-suite.js';

// JetStream on one node (R1): two replicas, each with its own connection, no shared disk.
registryStoreSuite(test, () => jetStreamReplicas(1, (js, manager, replicas) => JetStreamRegistryStore.open(js, manager, { replicas })));

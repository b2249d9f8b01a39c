import test from 'ava';
import { JetStreamUploadStore } from '../../actors/upload/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { uploadStoreSuite } from './upload-store-suite.js';

// JetStream on a 3-node cluster (R3), replicas on different "hosts" sharing one upload root (one
// storage id); a snapshot every 5 writes, so the suite crosses compactions.
uploadStoreSuite(test, () => jetStreamReplicas(3, (js, manager, replicas) => JetStreamUploadStore.open(js, manager, { replicas, storage: 'shared-root', snapshotEvery: 5 })));

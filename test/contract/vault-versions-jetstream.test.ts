import test from 'ava';
import { jetStreamVersionsStore } from '../helpers/vault-versions-stores.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// Versions and soft delete on JetStream (one node, R1): the same suite, and destroyed bytes erased from the stream's files.
vaultVersionsSuite(test, jetStreamVersionsStore);

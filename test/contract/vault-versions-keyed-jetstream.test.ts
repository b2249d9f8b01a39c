import test from 'ava';
import { jetStreamVersionsStore } from '../helpers/vault-versions-stores.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// The versions suite on JetStream (one node, R1) with every new value sealed under a value key of
// its own (docs/vault.md "Destroyed"): a destroy erases the key's message from its stream too.
vaultVersionsSuite(test, jetStreamVersionsStore, { keyed: true });

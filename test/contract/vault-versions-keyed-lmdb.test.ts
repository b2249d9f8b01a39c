import test from 'ava';
import { lmdbVersionsStore } from '../helpers/vault-versions-stores.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// The versions suite on LMDB with every new value sealed under a value key of its own (what the
// release after 0.3.0 writes; 0.3.0 reads it, and erases its keys): docs/vault.md "Destroyed".
vaultVersionsSuite(test, lmdbVersionsStore, { keyed: true });

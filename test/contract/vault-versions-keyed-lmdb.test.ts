import test from 'ava';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbVaultStore } from '../../actors/vault/store.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// The versions suite on LMDB with every new value sealed under a value key of its own (what the
// release after 0.3.0 writes; 0.3.0 reads it, and erases its keys): docs/vault.md "Destroyed".
vaultVersionsSuite(
  test,
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pier-vault-keyed-'));
    const store = LmdbVaultStore.open(dir, 'r1');
    return {
      store,
      erases: false,
      files: () => readdirSync(dir).map((f) => join(dir, f)),
      close: async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  { keyed: true },
);

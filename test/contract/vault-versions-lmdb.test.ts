import test from 'ava';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbVaultStore } from '../../actors/vault/store.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';

// Versions and soft delete on the embedded default (one LMDB environment).
vaultVersionsSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vault-versions-'));
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
});

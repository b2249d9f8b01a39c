import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbVaultStore } from '../../actors/vault/store-lmdb.js';
import { vaultStoreSuite } from './vault-store-suite.js';

// The embedded default: two replicas on one host share one LMDB environment.
vaultStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vault-store-'));
  const a = LmdbVaultStore.open(dir, 'ra');
  const b = LmdbVaultStore.open(dir, 'rb');
  return {
    a,
    b,
    turn: () => new Promise((r) => setTimeout(r, 2)),
    close: async () => {
      await a.close();
      await b.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

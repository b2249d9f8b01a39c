import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbRegistryStore } from '../../actors/registry/store.js';
import { registryStoreSuite } from './registry-store-suite.js';

// The embedded default: replicas on one host share one LMDB environment.
registryStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-registry-store-'));
  const a = LmdbRegistryStore.open(dir);
  const b = LmdbRegistryStore.open(dir);
  return {
    a,
    b,
    another: async () => LmdbRegistryStore.open(dir),
    turn: () => new Promise((r) => setTimeout(r, 2)),
    close: async () => {
      await a.close();
      await b.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

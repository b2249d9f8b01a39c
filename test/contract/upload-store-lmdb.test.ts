import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbUploadStore } from '../../actors/upload/store.js';
import { uploadStoreSuite } from './upload-store-suite.js';

// The embedded default: replicas on one host share one LMDB environment.
uploadStoreSuite(test, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-upload-store-'));
  const stores = [LmdbUploadStore.open(dir), LmdbUploadStore.open(dir)];
  return {
    a: stores[0],
    b: stores[1],
    another: async () => {
      const s = LmdbUploadStore.open(dir);
      stores.push(s);
      return s;
    },
    turn: () => new Promise((r) => setTimeout(r, 2)),
    close: async () => {
      for (const s of stores) await s.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

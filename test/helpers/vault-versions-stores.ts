import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbVaultStore } from '../../actors/vault/store-lmdb.js';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import type { VersionsStore } from '../contract/vault-versions-suite.js';
import { jetStreamReplicas } from './jetstream-replicas.js';

/** The versions suite's store on the embedded default: one LMDB environment in a temp folder. */
export async function lmdbVersionsStore(): Promise<VersionsStore> {
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
}

/** The versions suite's store on JetStream: one node (R1), its files on this disk, and another replica on demand. */
export async function jetStreamVersionsStore(): Promise<VersionsStore> {
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 }));
  return {
    store: pair.a,
    erases: true,
    another: () => pair.another(),
    files: () => (readdirSync(pair.storeDir, { recursive: true }) as string[]).map((f) => join(pair.storeDir, f)).filter((f) => statSync(f).isFile()),
    close: () => pair.close(),
  };
}

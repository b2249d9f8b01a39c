import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { appAccount, scopeAccount, scopeKey, secretKey, versionKey } from '../../actors/vault/store.js';
import { LmdbVaultStore } from '../../actors/vault/store-lmdb.js';
import { vaultVersionsSuite } from './vault-versions-suite.js';
import { lmdbVersionsStore } from '../helpers/vault-versions-stores.js';

// Versions and soft delete on the embedded default (one LMDB environment).
vaultVersionsSuite(test, lmdbVersionsStore);

test('versions an earlier build kept without counting them per app are counted at the next open', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vault-accounts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const scope = scopeKey('alice', 'w', 'prod');
  const first = LmdbVaultStore.open(dir, 'r1');
  await first.write((w) => {
    w.putVersion(versionKey(secretKey(scope, 's'), 'g', 1), { format: 1, sealed: new Uint8Array(100), version: 1, at: 'a', by: 'chat', keptBy: 'mail' });
    // Kept before `keptBy`: it is its writer's.
    w.putVersion(versionKey(secretKey(scope, 's'), 'g', 2), { format: 1, sealed: new Uint8Array(40), version: 2, at: 'b', by: 'chat' });
  });
  await first.close();
  // What such a build left: the versions, and no counts in the database the accounts live in.
  const root = open({ path: dir, compression: false });
  await root.openDB({ name: 'version-accounts' }).clearAsync();
  await root.close();
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const counted = await store.write((w) => [scopeAccount(scope, 'mail'), appAccount('alice', 'mail'), scopeAccount(scope, 'chat'), appAccount('alice', 'chat')].map((a) => w.accountBytes(a)));
  t.deepEqual(counted, [100, 100, 40, 40]);
});

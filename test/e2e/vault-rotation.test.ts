import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

test('master key rotation: restart with the new key and the old as previous, rotate, then the old key can go', async (t) => {
  const dir = tempDir();
  const data = join(dir, 'data');
  const k1 = randomBytes(32).toString('hex');
  const k2 = randomBytes(32).toString('hex');
  let pier = await PierProcess.start(pierEnv(data, { PIER_MASTER_KEY: k1 }));
  t.teardown(async () => {
    await pier.stop();
    cleanup(dir);
  });
  const envOf = (p: PierProcess) => ({ ...p.env, PIER_ADMIN_URL: p.adminUrl });
  const user = (await cli(['user', 'add', 'alice', '--json'], envOf(pier))).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, UpdateSecret?workspace=chat, RetrieveSecretVersion?workspace=chat] }\n');
  const app: AppEnv = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], envOf(pier))).json.env;
  const withSystem = (p: PierProcess): AppEnv => ({ ...app, OS_SYSTEM_SERVER: `127.0.0.1:${p.ports!.system}` });
  const retrieve = async (p: PierProcess) => {
    const access = await accessToken(withSystem(p), vaultPerm('chat', ['RetrieveSecret', 'CreateSecret']));
    return vaultCall(withSystem(p).OS_SYSTEM_SERVER, 'RetrieveSecret', 'chat', { user, access }, { name: 'kept' });
  };
  const access1 = await accessToken(withSystem(pier), vaultPerm('chat', ['CreateSecret']));
  t.is((await vaultCall(withSystem(pier).OS_SYSTEM_SERVER, 'CreateSecret', 'chat', { user, access: access1 }, { name: 'kept', value: 'across-rotation' })).status, 200);
  // An earlier version, and a deleted secret, kept across the rotation too (docs/vault.md "Versions").
  const versioned = await accessToken(withSystem(pier), vaultPerm('chat', ['CreateSecret', 'UpdateSecret']));
  t.is((await vaultCall(withSystem(pier).OS_SYSTEM_SERVER, 'CreateSecret', 'chat', { user, access: versioned }, { name: 'older', value: 'version-one' })).status, 200);
  t.is((await vaultCall(withSystem(pier).OS_SYSTEM_SERVER, 'UpdateSecret', 'chat', { user, access: versioned }, { name: 'older', value: 'version-two' })).status, 200);
  writeFileSync(join(dir, 'v.txt'), 'deleted-before-rotation');
  t.is((await cli(['vault', 'set', '--user', 'alice', '--workspace', 'chat', 'gone', '--value-file', join(dir, 'v.txt')], envOf(pier))).code, 0);
  t.is((await cli(['vault', 'delete', '--user', 'alice', '--workspace', 'chat', 'gone'], envOf(pier))).code, 0);
  await pier.stop();

  // New key, old key as previous: everything still opens.
  pier = await PierProcess.start(pierEnv(data, { PIER_MASTER_KEY: k2, PIER_MASTER_KEY_PREVIOUS: k1 }));
  t.is((await retrieve(pier)).json.data.data.value, 'across-rotation');
  const rotated = await cli(['vault', 'rotate-master-key', '--json'], envOf(pier));
  t.is(rotated.code, 0, rotated.stderr);
  t.deepEqual(rotated.json, { rewrappedDataKeys: 1, resealedAppSecrets: 1, rewrapped_data_keys: 1, resealed_app_secrets: 1 });
  const again = await cli(['vault', 'rotate-master-key', '--json'], envOf(pier));
  t.deepEqual(again.json, { rewrappedDataKeys: 0, resealedAppSecrets: 0, rewrapped_data_keys: 0, resealed_app_secrets: 0 });
  await pier.stop();

  // The old key is gone: secrets, app secrets (access tokens) and the vault all work on the new one.
  pier = await PierProcess.start(pierEnv(data, { PIER_MASTER_KEY: k2 }));
  const after = await retrieve(pier);
  t.is(after.status, 200);
  t.is(after.json.data.data.value, 'across-rotation');
  const access = await accessToken(withSystem(pier), vaultPerm('chat', ['RetrieveSecretVersion']));
  const v1 = await vaultCall(withSystem(pier).OS_SYSTEM_SERVER, 'RetrieveSecretVersion', 'chat', { user, access }, { name: 'older', version: 1 });
  t.is(v1.json?.data?.data?.value, 'version-one', v1.text);
  t.is((await cli(['vault', 'undelete', '--user', 'alice', '--workspace', 'chat', 'gone'], envOf(pier))).code, 0);
  t.is((await cli(['vault', 'get', '--user', 'alice', '--workspace', 'chat', 'gone'], envOf(pier))).stdout.trim(), 'deleted-before-rotation');
});

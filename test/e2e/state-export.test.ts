import test from 'ava';
import { cliJson } from '../helpers/admin.js';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';

// `pier state export FILE` / `pier state import FILE` (docs/operations.md "How writes stay correct"): everything moves from
// LMDB to JetStream, secrets sealed all the way, the master key never in the file.
test('LMDB → file → JetStream: the same app, user and secrets work on the other side; an import never lands on a non-empty store', async (t) => {
  const dir = tempDir();
  const masterKey = randomBytes(32).toString('hex');
  const nats = await NatsServer.start(['-js', '-sd', join(dir, 'js')]);
  const from = await PierProcess.start(pierEnv(join(dir, 'lmdb'), { PIER_MASTER_KEY: masterKey }));
  let to: PierProcess | undefined;
  try {
    const fromCli = { ...from.env, PIER_ADMIN_URL: from.adminUrl };
    const user = (await cliJson('user add', ['alice'], fromCli)).json.token;
    writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [CreateSecret?workspace=w, RetrieveSecret?workspace=w] }\n');
    const app: AppEnv = (await cliJson('app install', ['--user', 'alice', '--manifest', join(dir, 'chat.yaml')], fromCli)).json.env;
    const access = await accessToken(app, vaultPerm('w', ['CreateSecret', 'RetrieveSecret']));
    const value = `moved-${randomBytes(8).toString('hex')}`;
    t.is((await vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', { user, access }, { name: 'db', value })).status, 200);
    // An earlier version and a deleted secret move too (docs/vault.md "Versions").
    const ws = ['--user', 'alice', '--workspace', 'w'];
    for (const [name, v] of [['hist', 'hist-one'], ['hist', 'hist-two'], ['bin', 'in-the-bin']]) {
      writeFileSync(join(dir, 'v.txt'), v);
      t.is((await cli(['vault', 'set', ...ws, name, '--value-file', join(dir, 'v.txt')], fromCli)).code, 0);
    }
    t.is((await cli(['vault', 'delete', ...ws, 'bin'], fromCli)).code, 0);

    const file = join(dir, 'state.ndjson');
    const exported = await cliJson('state export', [file], fromCli);
    t.is(exported.code, 0, exported.stderr);
    t.true(exported.json.records >= 5, JSON.stringify(exported.json));
    t.is(statSync(file).mode & 0o777, 0o600);
    const text = readFileSync(file, 'utf8');
    t.false(text.includes(value), 'the secret value is sealed in the file');
    for (const v of ['hist-one', 'hist-two', 'in-the-bin']) t.false(text.includes(v), `${v}: versions and deleted secrets sealed too`);
    t.true(text.includes('"kind":"version"') && text.includes('"kind":"deleted"'), 'the file carries them');
    t.false(text.includes(masterKey), 'no master key (hex)');
    t.false(text.includes(Buffer.from(masterKey, 'hex').toString('base64')), 'no master key (base64)');
    t.false(text.includes(app.OS_APP_SECRET), 'app secrets sealed too');
    t.is((await cli(['state', 'export', file], fromCli)).code, 1, 'never overwrites');
    await from.stop();

    to = await PierProcess.start(pierEnv(join(dir, 'js-data'), { PIER_MASTER_KEY: masterKey, NATS_URL: nats.url, PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' }), [], 60_000);
    const toCli = { ...to.env, PIER_ADMIN_URL: to.adminUrl };
    // Hostile: a file that is not an export is refused naming the line, and leaves the target empty.
    writeFileSync(join(dir, 'bad.ndjson'), '{"kind":"user","value":{"name":"bob","createdAt":"t"}}\nnot json\n');
    const bad = await cli(['state', 'import', join(dir, 'bad.ndjson')], toCli);
    t.is(bad.code, 1);
    t.regex(bad.stderr, /line 2: not JSON \(400\)/);
    writeFileSync(join(dir, 'deep.ndjson'), `{"kind":"user","value":${'['.repeat(5000)}${']'.repeat(5000)}}\n`);
    const deep = await cli(['state', 'import', join(dir, 'deep.ndjson')], toCli);
    t.regex(deep.stderr, /line 1: nested deeper than 64 levels \(400\)/);
    const imported = await cliJson('state import', [file], toCli);
    t.is(imported.code, 0, imported.stderr);
    t.is(imported.json.imported, exported.json.records);
    const again = await cli(['state', 'import', file], toCli);
    t.is(again.code, 6, 'conflict');
    t.regex(again.stderr, /the target already holds state: import goes into an empty registry and vault \(409\)/);

    // The app moved with its key and secret; alice's token and the secret too.
    const moved = { ...app, OS_SYSTEM_SERVER: `127.0.0.1:${to.ports!.system}` };
    const access2 = await until('an access token on the JetStream side', () => accessToken(moved, vaultPerm('w', ['RetrieveSecret'])));
    const read = await vaultCall(moved.OS_SYSTEM_SERVER, 'RetrieveSecret', 'w', { user, access: access2 }, { name: 'db' });
    t.is(read.json?.data?.data?.value, value, read.text);
    t.like((await cliJson('vault versions', [...ws, 'hist'], toCli)).json, { version: 2, versions: [{ version: 2, current: true }, { version: 1, kept: true }] });
    t.deepEqual((await cliJson('vault restore', [...ws, 'hist', '--version', '1'], toCli)).json, { name: 'hist', env: 'prod', version: 3, restored: 1 });
    t.is((await cli(['vault', 'get', ...ws, 'hist'], toCli)).stdout.trim(), 'hist-one');
    t.like((await cliJson('vault deleted', ws, toCli)).json, [{ name: 'bin', version: 1 }]);
    t.is((await cli(['vault', 'undelete', ...ws, 'bin'], toCli)).code, 0);
    t.is((await cli(['vault', 'get', ...ws, 'bin'], toCli)).stdout.trim(), 'in-the-bin');
    const audit = await cliJson('vault audit', ['--user', 'alice'], toCli);
    t.true(audit.json.some((e) => e.op === 'CreateSecret' && e.name === 'db'), 'the audit moved too');
  } finally {
    await from.stop();
    await to?.stop();
    await nats.stop();
    cleanup(dir);
  }
});

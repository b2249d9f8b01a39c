import test from 'ava';
import { cliJson } from '../helpers/admin.js';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

// The operator's vault commands (issue: operator experience): seed, read, list, delete and purge a
// user's secrets from the CLI through the admin API, audited as the operator, values shown only by
// an explicit get, never in a flag, a list or the logs.
let dir: string;
let pier: PierProcess;
let env: Record<string, string>;
let chat: AppEnv;
let userToken: string;

test.before(async () => {
  dir = tempDir();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  userToken = (await cliJson('user add', ['alice'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: ["RetrieveSecret?workspace=chat", "ListSecret?workspace=chat"] }\n');
  chat = (await cliJson('app install', ['--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env)).json.env;
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

const target = ['--user', 'alice', '--workspace', 'chat'];

test.serial('set from a file, the app reads it; list shows no value; get does; delete; all audited as the operator', async (t) => {
  const value = `motto-${randomBytes(8).toString('hex')}`;
  writeFileSync(join(dir, 'value.txt'), value);
  const set = await cliJson('vault set', [...target, 'motto', '--value-file', join(dir, 'value.txt')], env);
  t.is(set.code, 0, set.stderr);
  // The app sees what the operator seeded.
  const read = await vaultCall(chat.OS_SYSTEM_SERVER, 'RetrieveSecret', 'chat', { user: userToken, access: await accessToken(chat, vaultPerm('chat', ['RetrieveSecret'])) }, { name: 'motto' });
  t.true(read.text.includes(value), read.text);
  const list = await cliJson('vault list', [...target], env);
  t.deepEqual(list.json.map((s: { name: string; version: number; updatedBy: string }) => [s.name, s.version, s.updatedBy]), [['motto', 1, '(operator)']]);
  t.false(list.stdout.includes(value), 'no value in a list');
  const got = await cli(['vault', 'get', ...target, 'motto'], env);
  t.is(got.stdout, `${value}\n`);
  t.is((await cliJson('vault set', [...target, 'motto', '--value-file', join(dir, 'value.txt')], env)).json.version, 2, 'set again updates');
  t.is((await cli(['vault', 'delete', ...target, 'motto'], env)).code, 0);
  const gone = await cli(['vault', 'get', ...target, 'motto'], env);
  t.is(gone.code, 5, 'not found');
  const audit = await cliJson('vault audit', ['--user', 'alice'], env);
  const mine = audit.json.filter((e) => e.app === '(operator)').map((e) => `${e.op}:${e.outcome}`);
  t.deepEqual(mine.sort(), ['CreateSecret:ok', 'DeleteSecret:ok', 'ListSecret:ok', 'RetrieveSecret:NOT_FOUND', 'RetrieveSecret:ok', 'UpdateSecret:ok'].sort());
  t.false(audit.stdout.includes(value));
  t.false(pier.logs.includes(value), 'the value is in no log line');
});

test.serial('versions: who wrote each one, when and its size, newest first; never a value; audited; a missing secret is 404', async (t) => {
  // A workspace of its own: the tests after this one count what is in `chat`.
  const elsewhere = ['--user', 'alice', '--workspace', 'notes'];
  const values = ['first', 'second value', `third-${randomBytes(8).toString('hex')}`];
  for (const v of values) {
    writeFileSync(join(dir, 'value.txt'), v);
    t.is((await cli(['vault', 'set', ...elsewhere, '--env', 'staging', 'token', '--value-file', join(dir, 'value.txt')], env)).code, 0);
  }
  const listed = await cliJson('vault versions', [...elsewhere, '--env', 'staging', 'token'], env);
  t.is(listed.code, 0, listed.stderr);
  t.like(listed.json, { name: 'token', env: 'staging', version: 3 });
  t.deepEqual(
    listed.json.versions.map((v) => [v.version, v.by, v.size, v.current, v.kept]),
    [[3, '(operator)', Buffer.byteLength(values[2]), true, true], [2, '(operator)', 12, false, true], [1, '(operator)', 5, false, true]],
  );
  t.true(listed.json.versions.every((v) => !Number.isNaN(Date.parse(v.at))));
  const text = await cli(['vault', 'versions', ...elsewhere, '--env', 'staging', 'token'], env);
  t.regex(text.stdout, /^VERSION\s+AT\s+BY\s+SIZE\s+VALUE\n3 \(current\)\s.*\skept\n/);
  for (const v of values) t.false(text.stdout.includes(v) || listed.stdout.includes(v), 'no value in the listing');
  const missing = await cli(['vault', 'versions', ...elsewhere, '--env', 'staging', 'nope'], env);
  t.is(missing.code, 5, missing.stderr);
  const audit = await cliJson('vault audit', ['--user', 'alice', '--op', 'ListVersions'], env);
  t.true(audit.json.some((e) => e.app === '(operator)' && e.name === 'token' && e.outcome === 'ok'));
});

test.serial('restore, delete, undelete and destroy from the CLI: the app sees each at once; audited; bad versions are usage errors', async (t) => {
  const where = ['--user', 'alice', '--workspace', 'chat', '--env', 'dev'];
  const values = [`one-${randomBytes(6).toString('hex')}`, `two-${randomBytes(6).toString('hex')}`];
  for (const v of values) {
    writeFileSync(join(dir, 'value.txt'), v);
    t.is((await cli(['vault', 'set', ...where, 'undo', '--value-file', join(dir, 'value.txt')], env)).code, 0);
  }
  const get = async () => (await cli(['vault', 'get', ...where, 'undo'], env)).stdout.trim();
  t.deepEqual((await cliJson('vault restore', [...where, 'undo', '--version', '1'], env)).json, { name: 'undo', env: 'dev', version: 3, restored: 1 });
  t.is(await get(), values[0], 'version 1 is the value again, as version 3');
  // Deleted: gone for the app (404), listed as deleted for the operator, back with undelete.
  t.is((await cli(['vault', 'delete', ...where, 'undo'], env)).code, 0);
  const app = { user: userToken, access: await accessToken(chat, vaultPerm('chat', ['RetrieveSecret'])) };
  t.is((await vaultCall(chat.OS_SYSTEM_SERVER, 'RetrieveSecret', 'chat', app, { name: 'undo', env: 'dev' })).status, 404);
  const deleted = await cliJson('vault deleted', where, env);
  t.like(deleted.json, [{ name: 'undo', version: 3, deletedBy: '(operator)' }]);
  t.false(deleted.stdout.includes(values[0]) || deleted.stdout.includes(values[1]));
  t.deepEqual((await cliJson('vault undelete', [...where, 'undo'], env)).json, { name: 'undo', env: 'dev', version: 3 });
  const back = await vaultCall(chat.OS_SYSTEM_SERVER, 'RetrieveSecret', 'chat', app, { name: 'undo', env: 'dev' });
  t.true(back.text.includes(values[0]), back.text);
  t.deepEqual((await cliJson('vault destroy', [...where, 'undo', '--version', '2'], env)).json, { name: 'undo', env: 'dev', destroyed: [2] });
  const restoreGone = await cli(['vault', 'restore', ...where, 'undo', '--version', '2'], env);
  t.is(restoreGone.code, 5, restoreGone.stderr);
  t.regex(restoreGone.stderr, /version 2 of "undo" is not kept \(kept: 1\)/);
  // --version must be a whole number; restore needs it.
  for (const bad of ['0', '-1', 'x', '1.5']) {
    const r = await cli(['vault', 'restore', ...where, 'undo', '--version', bad], env);
    t.is(r.code, 2, `--version ${bad}: ${r.stderr}`);
  }
  t.is((await cli(['vault', 'restore', ...where, 'undo'], env)).code, 2, 'restore without --version');
  const audit = await cliJson('vault audit', ['--user', 'alice', '--app', '(operator)'], env);
  const ops = new Set(audit.json.map((e: { op: string; outcome: string }) => `${e.op}:${e.outcome}`));
  for (const o of ['RestoreVersion:ok', 'ListDeleted:ok', 'Undelete:ok', 'Destroy:ok', 'RestoreVersion:NOT_FOUND']) t.true(ops.has(o), o);
  t.false(audit.stdout.includes(values[0]) || pier.logs.includes(values[0]), 'no value in the audit or the logs');
  // Deleted and destroyed whole: nothing of it is left to list, undelete or restore.
  t.is((await cli(['vault', 'delete', ...where, 'undo'], env)).code, 0);
  t.deepEqual((await cliJson('vault destroy', [...where, 'undo'], env)).json, { name: 'undo', env: 'dev', destroyed: [1, 3] });
  t.deepEqual((await cliJson('vault deleted', where, env)).json, []);
  t.is((await cli(['vault', 'versions', ...where, 'undo'], env)).code, 5);
});

test.serial('purge removes every secret of the workspace in every env (what a plain uninstall kept)', async (t) => {
  writeFileSync(join(dir, 'v.txt'), 'x');
  for (const e of ['prod', 'dev']) t.is((await cli(['vault', 'set', ...target, '--env', e, 'key', '--value-file', join(dir, 'v.txt')], env)).code, 0);
  await cli(['app', 'uninstall', '--user', 'alice', 'chat'], env);
  const before = await Promise.all(['prod', 'dev'].map(async (e) => (await cliJson('vault list', [...target, '--env', e], env)).json.map((s: { name: string }) => `${e}/${s.name}`)));
  t.deepEqual(before.flat().sort(), ['dev/key', 'prod/key']);
  const purged = await cliJson('vault purge', [...target], env);
  t.deepEqual(purged.json, { purged: 2 });
  for (const e of ['prod', 'dev']) t.deepEqual((await cliJson('vault list', [...target, '--env', e], env)).json, []);
});

test.serial('hostile: an unknown user is 404, a bad workspace or env 400, a missing value file a usage error; nothing is written', async (t) => {
  const unknown = await cli(['vault', 'list', '--user', 'mallory', '--workspace', 'chat'], env);
  t.is(unknown.code, 5);
  t.regex(unknown.stderr, /user "mallory" not found \(404\)/);
  const badWs = await cli(['vault', 'list', '--user', 'alice', '--workspace', '../etc'], env);
  t.is(badWs.code, 1);
  t.regex(badWs.stderr, /workspace/);
  const badEnv = await cli(['vault', 'list', ...target, '--env', 'production'], env);
  t.is(badEnv.code, 1);
  const noFile = await cli(['vault', 'set', ...target, 'k', '--value-file', join(dir, 'missing')], env);
  t.not(noFile.code, 0);
  t.deepEqual((await cliJson('vault list', [...target], env)).json, []);
});

test.serial('the names . and .. are secrets like any other from the CLI (a URL would collapse them)', async (t) => {
  writeFileSync(join(dir, 'dot.txt'), 'dot');
  for (const name of ['.', '..']) {
    t.is((await cli(['vault', 'set', ...target, name, '--value-file', join(dir, 'dot.txt')], env)).code, 0, name);
    t.is((await cli(['vault', 'get', ...target, name], env)).stdout, 'dot\n', name);
    t.is((await cli(['vault', 'delete', ...target, name], env)).code, 0, name);
  }
});

test.serial('a value over 64 KiB is 413 (too large), not a 400', async (t) => {
  writeFileSync(join(dir, 'big.txt'), 'x'.repeat(70_000));
  const r = await cliJson('vault set', [...target, 'big', '--value-file', join(dir, 'big.txt')], env);
  t.is(JSON.parse(r.stderr).error.status, 413);
});

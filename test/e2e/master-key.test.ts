import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, failedStart, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

// A wrong master key is refused at once (issue: no silent traps): Pier on data sealed under another
// key, or `pier state import` of a file sealed under another key, stops with one line naming
// PIER_MASTER_KEY and the rotation procedure, instead of "pier ready" and every vault read failing.
const keyA = randomBytes(32).toString('hex');
const keyB = randomBytes(32).toString('hex');

async function pierWithAnApp(dir: string, key: string): Promise<PierProcess> {
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_MASTER_KEY: key }));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  await cli(['user', 'add', 'alice'], env);
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\n');
  const r = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return pier;
}

test('starting on data sealed under another master key stops with one line; the old key as PIER_MASTER_KEY_PREVIOUS starts it', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  await (await pierWithAnApp(dir, keyA)).stop();
  const wrong = await failedStart(pierEnv(join(dir, 'data'), { PIER_MASTER_KEY: keyB }));
  t.not(wrong.code, 0);
  t.is(wrong.stderr.trim().split('\n').length, 1, wrong.stderr);
  t.regex(wrong.stderr, /^pier: PIER_MASTER_KEY: the registry's data was sealed under another master key \(app alice\/chat\): .*PIER_MASTER_KEY_PREVIOUS.*rotate-master-key/);
  const rotating = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_MASTER_KEY: keyB, PIER_MASTER_KEY_PREVIOUS: keyA }));
  const env = { ...rotating.env, PIER_ADMIN_URL: rotating.adminUrl };
  t.is((await cli(['vault', 'rotate-master-key'], env)).code, 0);
  await rotating.stop();
  // Rotated: the new key alone is now the one.
  const rotated = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_MASTER_KEY: keyB }));
  await rotated.stop();
  t.pass();
});

test('state import of a file sealed under another master key is refused, and nothing is imported', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const from = await pierWithAnApp(join(dir, 'from'), keyA);
  t.teardown(() => from.stop());
  const file = join(dir, 'state.ndjson');
  t.is((await cli(['state', 'export', file], { ...from.env, PIER_ADMIN_URL: from.adminUrl })).code, 0);
  const to = await PierProcess.start(pierEnv(join(dir, 'to'), { PIER_MASTER_KEY: keyB }));
  t.teardown(() => to.stop());
  const toEnv = { ...to.env, PIER_ADMIN_URL: to.adminUrl };
  const imported = await cli(['state', 'import', file], toEnv);
  t.not(imported.code, 0);
  t.regex(imported.stderr, /state import: the file was sealed under another master key than this Pier's PIER_MASTER_KEY \(app alice\/chat\)/);
  t.deepEqual((await cli(['user', 'list', '--json'], toEnv)).json, []);
  t.deepEqual((await cli(['app', 'list', '--json'], toEnv)).json, []);
});

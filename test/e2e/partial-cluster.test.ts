import test from 'ava';
import { cliJson } from '../helpers/admin.js';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';

// A cluster started as the README's first scale-out steps do: registry, edge and admin only. The
// operator is told which roles are missing, by `pier status`, by the admin /readyz, and by the
// answers that need them, in words.
let dir: string;
let nats: NatsServer;
const procs: PierProcess[] = [];
let env: Record<string, string>;

test.before(async () => {
  dir = tempDir();
  nats = await NatsServer.start();
  const shared = { NATS_URL: nats.url, PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_HEARTBEAT_MS: '250' };
  procs.push(await PierProcess.start(pierEnv(join(dir, 'registry'), shared), ['--roles', 'registry']));
  procs.push(await PierProcess.start(pierEnv(join(dir, 'edge'), shared), ['--roles', 'edge,admin']));
  env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: procs[1].adminUrl };
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await nats?.stop();
  cleanup(dir);
});

const MISSING = ['token', 'provider', 'vault', 'callback', 'upload'];

test('pier status and the admin /readyz name every role with no live process', async (t) => {
  const status = await until('the status to list the live roles', async () => {
    const r = await cliJson('status', [], env);
    return r.code === 0 && r.json.roles.includes('registry') ? r : undefined;
  });
  t.deepEqual([...status.json.missingRoles].sort(), [...MISSING].sort());
  const human = await cli(['status'], env);
  t.regex(human.stdout, /MISSING: no token, provider, vault, callback, upload replica is running/);
  const ready = await fetch(`${procs[1].adminUrl}/readyz`);
  t.is(ready.status, 503);
  const body = (await ready.json()) as { message: string };
  for (const role of MISSING) t.true(body.message.includes(`no ${role} replica is running`), body.message);
  // The public listener's readiness is its own: it needs the registry, which is there.
  t.is((await fetch(`http://127.0.0.1:${procs[1].ports!.public}/readyz`)).status, 200);
});

test('a request that needs a missing role says which, in words (503)', async (t) => {
  const audit = await cliJson('vault audit', [], env);
  t.not(audit.code, 0);
  t.regex(audit.stderr, /no vault replica is running \(nothing answers pier\.vault\.audit\) \(503\)/);
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\nupload: { fileType: ["*"], dest: /data/chat }\n');
  await cli(['user', 'add', 'alice'], env);
  const install = await cliJson('app install', ['--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);
  t.regex(install.stdout + install.stderr, /no upload replica is running/);
});

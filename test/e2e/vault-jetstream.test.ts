import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { until } from '../helpers/wait.js';

// PIER_STATE=jetstream for the vault (docs/operations.md "How writes stay correct"), with every role on its own NATS
// identity over TLS: no vault process holds the secrets on its disk. A replacement vault on a fresh
// data dir ("another host") serves what the first one wrote; two replicas on different data dirs
// give contended creates exactly one winner. (One JetStream node: see test/contract/vault-store-jetstream.)
let dir: string;
let bus: SecureBus;
const procs: PierProcess[] = [];
let app: AppEnv;
let userToken: string;
const masterKey = randomBytes(32).toString('hex');
const adminToken = randomBytes(24).toString('hex');

const start = (role: string, name = role, extra: Record<string, string> = {}) =>
  PierProcess.start(
    pierEnv(join(dir, name), {
      ...bus.envFor(role),
      PIER_HEARTBEAT_MS: '250',
      ...(['registry', 'token', 'provider', 'vault'].includes(role) ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
      ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
      ...(role === 'vault' ? { PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' } : {}),
      ...extra,
    }),
    ['--roles', role],
  );

test.before(async () => {
  dir = tempDir();
  bus = await SecureBus.start(dir, {}, { jetstream: true });
  for (const role of ['registry', 'token', 'vault', 'edge']) procs.push(await start(role));
  const edge = procs[3];
  procs.push(await start('admin', 'admin', { PIER_SYSTEM_URL: `127.0.0.1:${edge.ports!.system}` }));
  const env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: procs[4].adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), `metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [CreateSecret?workspace=w, RetrieveSecret?workspace=w, ListSecret?workspace=w] }\n`);
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  app = installed.json.env;
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await bus?.stop();
  cleanup(dir);
});

const auth = async () => ({ user: userToken, access: await until('an access token', () => accessToken(app, vaultPerm('w', ['CreateSecret', 'RetrieveSecret', 'ListSecret']))) });

test.serial('secrets written through one vault process are served by a replacement on another data dir', async (t) => {
  const a = await auth();
  const created = await until('the vault to answer', async () => {
    const r = await vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', a, { name: 'db', value: 'on-jetstream' });
    return r.status === 503 ? undefined : r;
  });
  t.is(created.status, 200, created.text);
  // The vault process and its data dir go; a new one starts elsewhere (its own fresh data dir).
  const old = procs.splice(2, 1)[0];
  await old.stop('SIGKILL');
  procs.push(await start('vault', 'vault-elsewhere'));
  const read = await until('the replacement vault to serve the secret', async () => {
    const r = await vaultCall(app.OS_SYSTEM_SERVER, 'RetrieveSecret', 'w', a, { name: 'db' });
    return r.status === 200 ? r : undefined;
  });
  t.is(read.json.data.data.value, 'on-jetstream');
  // The audit survived too: it is a stream, not a file.
  const env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: procs.find((p) => p.ports?.admin)!.adminUrl };
  const audit = await cli(['vault', 'audit', '--user', 'alice', '--json'], env);
  t.true(audit.json.some((e: { op: string; name: string }) => e.op === 'CreateSecret' && e.name === 'db'), audit.stdout);
});

test.serial('two vault replicas on different data dirs: 20 contended creates, exactly one winner', async (t) => {
  procs.push(await start('vault', 'vault-second'));
  const a = await auth();
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', a, { name: 'contended', value: `v${i}` })));
  t.deepEqual(results.map((r) => r.status).sort(), [200, ...Array(19).fill(409)]);
});

// A writer asks every vault replica to take its mark in before it answers (actors/vault/index.ts
// announce): a read that follows the answer sees the write whichever replica serves it (the queue
// group picks one). With a one-way announcement an upgrade run saw a list 220 ms stale; that race
// is rare on a quiet machine (this test passed with the wait taken out), so the order itself is
// held by test/contract/vault-store-jetstream.test.ts ("answered only once its announcement...").
test.serial('two vault replicas: each write is seen by the read right after its answer, whichever replica serves it', async (t) => {
  const a = await auth();
  for (let i = 0; i < 40; i++) {
    const name = `ryw-${i}`;
    const created = await vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', a, { name, value: `value-${i}` });
    t.is(created.status, 200, created.text);
    const [got, listed] = await Promise.all([
      vaultCall(app.OS_SYSTEM_SERVER, 'RetrieveSecret', 'w', a, { name }),
      vaultCall(app.OS_SYSTEM_SERVER, 'ListSecret', 'w', a, {}),
    ]);
    t.is(got.status, 200, `${name} read right after its create: ${got.text}`);
    t.is(got.json.data.data.value, `value-${i}`);
    t.true((listed.json.data.data as Array<{ name: string }>).some((s) => s.name === name), `${name} listed right after its create`);
  }
});

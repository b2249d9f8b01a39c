import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';

/** Two vault replicas sharing one LMDB environment, apart from the edge, over real NATS. */
let nats: NatsServer;
let dir: string;
const procs: PierProcess[] = [];
let edge: PierProcess;
let app: AppEnv;
let userToken: string;
const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };

async function start(dataName: string, roles: string): Promise<PierProcess> {
  const p = await PierProcess.start(pierEnv(join(dir, dataName), { ...shared, NATS_URL: nats.url }), ['--roles', roles]);
  procs.push(p);
  return p;
}

test.before(async () => {
  dir = tempDir();
  nats = await NatsServer.start();
  await start('registry', 'registry');
  await start('token', 'token');
  await Promise.all([start('vault', 'vault'), start('vault', 'vault')]);
  edge = await start('edge', 'edge,admin');
  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, UpdateSecret?workspace=chat, ListSecret?workspace=chat] }\n');
  app = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await nats?.stop();
  cleanup(dir);
});

test('two replicas on one environment: creates, contention and check-and-set hold', async (t) => {
  const access = await until('an access token, once the caches have the install', () => accessToken(app, vaultPerm('chat', ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'ListSecret'])));
  const auth = { user: userToken, access };
  const sys = app.OS_SYSTEM_SERVER;
  // Wait until the vault replicas' caches know the user and app.
  await until("the vault replicas' caches to know the user and app", async () => (await vaultCall(sys, 'ListSecret', 'chat', auth, {})).status === 200, 10_000, 50);

  const distinct = await Promise.all(Array.from({ length: 100 }, (_, i) => vaultCall(sys, 'CreateSecret', 'chat', auth, { name: `s${i}`, value: `v${i}` })));
  t.deepEqual(distinct.map((r) => r.status), Array(100).fill(200));
  const same = await Promise.all(Array.from({ length: 20 }, () => vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'one', value: 'x' })));
  t.is(same.filter((r) => r.status === 200).length, 1);
  t.is(same.filter((r) => r.status === 409).length, 19);
  const cas = await Promise.all(Array.from({ length: 10 }, (_, i) => vaultCall(sys, 'UpdateSecret', 'chat', auth, { name: 'one', value: `c${i}`, version: 1 })));
  t.is(cas.filter((r) => r.status === 200).length, 1);
  const list = await vaultCall(sys, 'ListSecret', 'chat', auth, {});
  t.is(list.json.data.data.length, 101);

  const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const instances = new Set(metrics.split('\n').filter((l) => l.startsWith('pier_vault_operations_total{')).map((l) => /instance="([^"]+)"/.exec(l)![1]));
  t.is(instances.size, 2, 'both vault replicas served operations');
});

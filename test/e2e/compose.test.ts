import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { cli, pierEnv, ROOT, tempDir, cleanup } from '../helpers/pier.js';
import { LocalTopology, readCompose } from '../helpers/topology.js';

const secrets = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };
let topo: LocalTopology;
const scratch = tempDir();

test.before(async () => {
  topo = await LocalTopology.start(secrets);
});

test.after.always(async () => {
  await topo?.stop();
  cleanup(scratch);
});

const cliVia = (edge: string) => ({ ...pierEnv(scratch, secrets), PIER_ADMIN_URL: topo.pier.get(edge)!.adminUrl });
const until = async (cond: () => Promise<boolean>) => {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 50));
};

test.serial('the compose file describes a 3-node NATS cluster, every role, and at least two edges', (t) => {
  const services = readCompose();
  const roles = (name: string) => services[name].command?.[services[name].command!.indexOf('--roles') + 1];
  t.is(Object.values(services).filter((s) => s.image?.startsWith('nats')).length, 3);
  t.true(Object.keys(services).filter((n) => roles(n) === 'edge').length >= 2);
  for (const role of ['registry', 'token', 'provider', 'vault', 'callback', 'upload']) t.true(Object.keys(services).some((n) => roles(n)?.split(',').includes(role)), role);
  t.is(topo.nats.size, 3);
  t.true(topo.pier.size >= 3);
});

test.serial('an install through one edge is seen through the other, across the NATS cluster', async (t) => {
  const add = await cli(['user', 'add', 'alice', '--json'], cliVia('edge-1'));
  t.is(add.code, 0, add.stderr);
  const app = await cli(['app', 'install', '--user', 'alice', '--manifest', join(ROOT, 'examples', 'PlatformManifest.yaml'), '--json'], cliVia('edge-1'));
  t.is(app.code, 0, app.stderr);
  const list = await cli(['app', 'list', '--json'], cliVia('edge-2'));
  t.deepEqual(list.json.map((a: { app: string }) => a.app), ['chat']);
  const status = await cli(['status', '--json'], cliVia('edge-2'));
  t.is(status.json.replicas.length, topo.pier.size);
});

test.serial('one NATS node dies: the processes fail over to the others', async (t) => {
  await topo.nats.get('nats-1')!.kill();
  for (const edge of ['edge-1', 'edge-2']) await until(async () => (await cli(['user', 'list', '--json'], cliVia(edge))).code === 0);
  const add = await cli(['user', 'add', 'bob', '--json'], cliVia('edge-1'));
  t.is(add.code, 0, add.stderr);
  const users = await cli(['user', 'list', '--json'], cliVia('edge-2'));
  t.deepEqual(users.json.map((u: { name: string }) => u.name), ['alice', 'bob']);
});

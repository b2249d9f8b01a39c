import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { NatsBus } from '../../bus/bus-nats.js';
import { createLogger } from '../../lib/runtime/log.js';
import { Metrics } from '../../lib/runtime/metrics.js';
import { RegistryCache } from '../../lib/state/registry-cache.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';
import { sealingFor } from '../helpers/operator-bus.js';

/**
 * The registry actor and two edges as three processes over a real nats-server, each with its own
 * data dir (as on three hosts): the admin token and master key come from the environment.
 */
let nats: NatsServer;
const dirs: string[] = [];
let registry: PierProcess;
const edges: PierProcess[] = [];
const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_REGISTRY_MAX_STALENESS_MS: '1500' };

const envFor = (extra: Record<string, string> = {}) => {
  const dir = tempDir();
  dirs.push(dir);
  return pierEnv(dir, { ...shared, NATS_URL: nats.url, ...extra });
};
const cliOn = (edge: PierProcess) => ({ ...envFor(), PIER_ADMIN_URL: edge.adminUrl });

test.before(async () => {
  nats = await NatsServer.start();
  registry = await PierProcess.start(envFor(), ['--roles', 'registry']);
  edges.push(await PierProcess.start(envFor(), ['--roles', 'edge,admin']));
  edges.push(await PierProcess.start(envFor(), ['--roles', 'edge,admin']));
});

test.after.always(async () => {
  await Promise.all([registry, ...edges].map((p) => p?.stop('SIGKILL')));
  await nats?.stop();
  dirs.forEach(cleanup);
});

test.serial('install through the CLI on one edge; the other edge and status see it', async (t) => {
  const added = await cli(['user', 'add', 'alice', '--json'], cliOn(edges[0]));
  t.is(added.code, 0, added.stderr);
  const installed = await cli(
    ['app', 'install', '--user', 'alice', '--manifest', join(ROOT, 'examples', 'notes-manifest.yaml'), '--provider', join(ROOT, 'examples', 'ProviderRegistry.yaml'), '--json'],
    cliOn(edges[0]),
  );
  t.is(installed.code, 0, installed.stderr);
  t.is(installed.json.env.OS_SYSTEM_SERVER, `127.0.0.1:${edges[0].ports!.system}`);

  const listed = await cli(['app', 'list', '--json'], cliOn(edges[1]));
  t.deepEqual(listed.json.map((a: { user: string; app: string; appKey: string }) => [a.user, a.app, a.appKey]), [['alice', 'notes', installed.json.env.OS_APP_KEY]]);

  const status = await cli(['status', '--json'], cliOn(edges[1]));
  t.deepEqual(status.json.roles, ['admin', 'edge', 'registry']);
  t.is(status.json.bus.kind, 'nats');
  t.is(status.json.replicas.length, 3);
});

test.serial('a token revocation reaches a cache in another process', async (t) => {
  const bus = await NatsBus.connect({ url: nats.url, name: 'test-cache' });
  // As a Pier process without a role: it believes only snapshots and changes made with the registry's anchored keys.
  bus.sealing = sealingFor(shared.PIER_MASTER_KEY, []);
  const log = createLogger({ level: 'silent', name: 't', destination: new Writable({ write: (_c, _e, cb) => cb() }) });
  const cache = new RegistryCache(bus, { maxStalenessMs: 5_000, log, metrics: new Metrics('t') });
  t.teardown(async () => {
    cache.stop();
    await bus.close();
  });
  cache.start();
  await within('the cache to load the registry', cache.ready());
  const issued = await cli(['user', 'token', 'alice', '--json'], cliOn(edges[0]));
  await until('the new token in the cache', () => cache.userForToken(issued.json.token) === 'alice');
  const revoked = await cli(['user', 'revoke', 'alice', '--json'], cliOn(edges[1]));
  t.true(revoked.json.revoked >= 2);
  await until('the revoked token gone from the cache', () => cache.userForToken(issued.json.token) === undefined);
  t.pass();
});

test.serial('registry killed: edges answer 503, not hang; restarted: data intact', async (t) => {
  const registryEnv = registry.env;
  await registry.stop('SIGKILL');
  const down = await cli(['user', 'list'], cliOn(edges[0]));
  t.is(down.code, 3, 'unreachable: no registry replica');
  t.is(down.stderr, 'pier: no registry replica is running (nothing answers pier.registry.user.list) (503)\n');
  await until('the edge to stop being ready without the registry', async () => (await fetch(`http://127.0.0.1:${edges[1].ports!.public}/readyz`)).status === 503);
  const body = await (await fetch(`http://127.0.0.1:${edges[1].ports!.public}/readyz`)).json();
  t.deepEqual(body, { code: 503, message: 'not ready: registry not reachable' });

  registry = await PierProcess.start(registryEnv, ['--roles', 'registry']);
  await until('the edge to be ready again', async () => (await fetch(`http://127.0.0.1:${edges[1].ports!.public}/readyz`)).status === 200);
  const apps = await cli(['app', 'list', '--json'], cliOn(edges[1]));
  t.deepEqual(apps.json.map((a: { app: string }) => a.app), ['notes']);
});

test.serial('nats-server restarted: every process reconnects and the CLI works again', async (t) => {
  await nats.restart(300);
  await until('the admin path to reach the registry again', async () => (await cli(['user', 'list', '--json'], cliOn(edges[1]))).code === 0);
  const added = await cli(['user', 'add', 'bob', '--json'], cliOn(edges[0]));
  t.is(added.code, 0, added.stderr);
  await until('the first edge to be ready again', async () => (await fetch(`http://127.0.0.1:${edges[0].ports!.public}/readyz`)).status === 200);
  const users = await cli(['user', 'list', '--json'], cliOn(edges[1]));
  t.deepEqual(users.json.map((u: { name: string }) => u.name), ['alice', 'bob']);
});

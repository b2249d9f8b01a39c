import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';
import { connect, type Client } from '../helpers/ws-client.js';
import { until } from '../helpers/wait.js';

// Gateway history in the cluster shape (docs/gateway.md "History and recovery"): every role its own
// process and NATS identity, the edges without the master key (PIER_HISTORY_KEY), the history on
// JetStream in the edge's own account. Sends through two edges at once reach every connection in one
// order; a connection recovers on another edge after its own was killed (-9) or drained.
let dir: string;
let bus: SecureBus;
let app: WsApp;
let chat: AppEnv;
let token: string;
const masterKey = randomBytes(32).toString('hex');
const adminToken = randomBytes(24).toString('hex');
const edges: PierProcess[] = [];
const others: PierProcess[] = [];

const start = (role: string, name: string, extra: Record<string, string> = {}) =>
  PierProcess.start(
    pierEnv(join(dir, name), {
      ...bus.envFor(role),
      PIER_HEARTBEAT_MS: '250',
      PIER_PEER_DEAD_MS: '2000',
      ...(['registry', 'token', 'provider', 'vault'].includes(role) ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
      ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
      ...(role === 'edge' ? { PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' } : {}),
      ...extra,
    }),
    ['--roles', role],
  );

const local = (edge: PierProcess, body: unknown) =>
  fetch(`http://127.0.0.1:${edge.ports!.local}/runtime/ws/conn/send`, { method: 'POST', headers: { 'x-app-key': chat.OS_APP_KEY, 'x-app-secret': chat.OS_APP_SECRET }, body: JSON.stringify(body) }).then(
    async (r) => ({ status: r.status, json: await r.json() }),
  );
const open = (edge: PierProcess, recover?: string) => connect(edge.ports!.public, 'chat.alice.localhost', { 'x-authorization': token }, recover === undefined ? '/ws' : `/ws?recover=${recover}`);
type Frame = { event: string; data: { offset?: number; payload?: unknown; recovered?: boolean; epoch?: string; missed?: number; reason?: string } };
const frames = (c: Client) => c.received.map((f) => JSON.parse(f) as Frame);
const recovery = async (c: Client) => (await until('the recovery frame', () => frames(c).find((f) => f.event === 'pier.recovery'), 10_000)).data;

test.before(async () => {
  dir = tempDir();
  bus = await SecureBus.start(dir, {}, { jetstream: true });
  app = await WsApp.start();
  others.push(await start('registry', 'registry'), await start('callback', 'callback'));
  edges.push(await start('edge', 'edge1'), await start('edge', 'edge2'));
  others.push(await start('admin', 'admin', { PIER_SYSTEM_URL: `127.0.0.1:${edges[0].ports!.system}` }));
  const env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: others[2].adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  chat = installed.json.env;
  for (const e of edges) await until('each edge to know the app and keep history', async () => (await local(e, { users: ['alice'], payload: 'warm-up' })).json.data?.kept === true, 20_000);
});

test.after.always(async () => {
  await Promise.all([...edges, ...others].map((p) => p.stop('SIGKILL')));
  await app?.stop();
  await bus?.stop();
  cleanup(dir);
});

test.serial('sends through two edges at once reach every connection on both edges in one order: the offsets\'', async (t) => {
  const plain = [await open(edges[0]), await open(edges[1])];
  const asking = [await open(edges[0], ''), await open(edges[1], '')];
  for (const c of asking) await recovery(c);
  const sends = Array.from({ length: 60 }, (_, i) => local(edges[i % 2], { users: ['alice'], payload: i }));
  const answers = await Promise.all(sends);
  // `delivered` counts the edges that answered within the send's short gather (a loaded host may leave one out): what arrived is checked below.
  t.true(answers.every((a) => a.status === 200 && a.json.data.kept === true && a.json.data.delivered > 0), JSON.stringify(answers.filter((a) => a.status !== 200 || !a.json.data?.kept).slice(0, 3)));
  const byOffset = answers.map((a, i) => [a.json.data.offset as number, i] as const).sort((x, y) => x[0] - y[0]).map(([, i]) => i);
  await until('all 60 at every connection', () => plain.every((c) => c.received.length === 60) && asking.every((c) => c.received.length === 61), 20_000);
  for (const c of plain) t.deepEqual(c.received.map(Number), byOffset, 'a plain connection gets them in offset order');
  for (const c of asking) t.deepEqual(frames(c).slice(1).map((f) => f.data.payload), byOffset, 'so does one that asked');
  for (const c of [...plain, ...asking]) c.ws.terminate();
});

test.serial('an edge killed (-9): its connection comes back on the other edge and gets what was sent meanwhile, once, in order', async (t) => {
  const victim = edges[0];
  const c = await open(victim, '');
  const at = await recovery(c);
  const before = await local(edges[1], { users: ['alice'], payload: 'before' });
  await until('the first message', () => c.received.length === 2, 10_000);
  const position = `${at.epoch}:${frames(c)[1].data.offset}`;
  await victim.stop('SIGKILL');
  await c.closed;
  const meanwhile: number[] = [];
  for (const p of ['m1', 'm2', 'm3']) meanwhile.push((await local(edges[1], { users: ['alice'], payload: p })).json.data.offset);
  const back = await open(edges[1], position);
  t.like(await recovery(back), { recovered: true, missed: 3 });
  await local(edges[1], { users: ['alice'], payload: 'live' });
  await until('the replay and the live one', () => back.received.length === 5, 10_000);
  t.deepEqual(frames(back).slice(1).map((f) => f.data.payload), ['m1', 'm2', 'm3', 'live']);
  t.deepEqual(frames(back).slice(1, 4).map((f) => f.data.offset), meanwhile);
  t.true(before.json.data.offset < meanwhile[0]);
  back.ws.terminate();
  edges[0] = await start('edge', 'edge1b');
});

test.serial('an edge drained (SIGTERM, 1001): the connection recovers on the other edge', async (t) => {
  const draining = edges[0];
  await until('the new edge to keep history', async () => (await local(draining, { users: ['alice'], payload: 'warm-up' })).json.data?.kept === true, 20_000);
  const c = await open(draining, '');
  const at = await recovery(c);
  const stopping = draining.stop('SIGTERM');
  t.is((await c.closed).code, 1001);
  await stopping;
  const sent = await local(edges[1], { users: ['alice'], payload: 'while away' });
  t.true(sent.json.data.kept);
  const back = await open(edges[1], `${at.epoch}:${at.offset}`);
  t.like(await recovery(back), { recovered: true, missed: 1 });
  await until('the replay', () => back.received.length === 2, 10_000);
  t.is(frames(back)[1].data.payload, 'while away');
  back.ws.terminate();
});

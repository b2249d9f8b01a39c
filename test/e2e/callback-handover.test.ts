import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';
import { until } from '../helpers/wait.js';

// Stopping a callback replica while an app's callbacks fail (issue #40): what it could not deliver
// within its stop is handed to the other replica at once (it says goodbye, lib/runtime/peers.ts),
// not after the death bound, and nothing is lost or reordered. The death bound here is 60 s and the
// test waits at most 20 s for the hand-over: only the goodbye can make it in time.
const DEAD_MS = '60000';

test('a callback replica stopped with undelivered events hands them to the other replica: all delivered, in order, long before the death bound', async (t) => {
  t.timeout(90_000, 'five processes, a stop, the hand-over');
  const dir = tempDir();
  const nats = await NatsServer.start();
  let victimGone = false;
  const app = await WsApp.start({ fail: () => !victimGone });
  const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250', PIER_PEER_DEAD_MS: DEAD_MS };
  const start = (name: string, roles: string) => PierProcess.start(pierEnv(join(dir, name), { ...shared, NATS_URL: nats.url }), ['--roles', roles]);
  const procs: PierProcess[] = [];
  t.teardown(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await app.stop();
    await nats.stop();
    cleanup(dir);
  });
  procs.push(await start('registry', 'registry'));
  const callbacks = await Promise.all([start('cb1', 'callback'), start('cb2', 'callback')]);
  procs.push(...callbacks);
  const edge = await start('edge', 'edge,admin');
  procs.push(edge);
  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);

  const client = await until('the edge to take alice\'s connection', () => connect(edge.ports!.public, 'chat.alice.localhost', { 'x-authorization': token }).catch(() => undefined), 20_000);
  for (let m = 0; m < 8; m++) client.ws.send(JSON.stringify({ event: 'h', data: { m } }));
  await until('the app to have refused attempts (the events wait at one replica)', () => app.refused >= 2, 20_000);
  t.is(app.accepted.length, 0);

  // The replica holding the connection is the one that reports it.
  let instance = '';
  await until('a callback replica to report the connection', async () => {
    const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('pier_callback_connections{') && !l.endsWith(' 0'));
    instance = /instance="([^"]+)"/.exec(line ?? '')?.[1] ?? '';
    return instance !== '';
  });
  const victim = callbacks.find((p) => p.instance === instance);
  if (!victim) return t.fail(`no callback process has instance ${instance}`);

  t.is(await victim.stop('SIGTERM'), 0);
  victimGone = true;
  const left = victim.logs.split('\n').filter((l) => l.includes('callbacks left undelivered at stop')).map((l) => JSON.parse(l) as { app: string; events: number; msg: string });
  t.is(left.length, 1, victim.logs.slice(-3000));
  t.is(left[0].app, 'alice/chat');
  t.regex(left[0].msg, /another callback replica \(1 running\)/);

  // Well inside the 60 s death bound: the goodbye moved the events.
  await until('the open and all 8 messages at the app through the other replica', () => app.accepted.filter((k) => k.body.action === 'message').length >= 8, 20_000);
  t.is(app.accepted[0].body.action, 'open');
  const ms = [...new Set(app.accepted.filter((k) => k.body.action === 'message').map((k) => (k.body.data as { data: { m: number } }).data.m))];
  t.deepEqual(ms, [0, 1, 2, 3, 4, 5, 6, 7], 'every message once, in order');
  const seqs = app.accepted.map((k) => Number(k.headers['x-pier-seq']));
  t.deepEqual(seqs, [...seqs].sort((a, b) => a - b), 'delivered in order');
  client.ws.close(1000);
  await app.until(() => app.accepted.some((k) => k.body.action === 'close'));
});

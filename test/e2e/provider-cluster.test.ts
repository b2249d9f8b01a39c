import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, callProvider, type AppEnv } from '../helpers/app-client.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { until } from '../helpers/wait.js';

/** Token and provider actors, two replicas each, in processes apart from the edge, over real NATS. */
let nats: NatsServer;
let upstream: ProviderServer;
let dir: string;
const procs: PierProcess[] = [];
let edge: PierProcess;
let chat: AppEnv;
const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };

async function start(name: string, roles: string): Promise<PierProcess> {
  const p = await PierProcess.start(pierEnv(join(dir, name), { ...shared, NATS_URL: nats.url }), ['--roles', roles]);
  procs.push(p);
  return p;
}

/** `metric{...instance="X"...} value` lines of the merged /metrics, summed per instance. */
function perInstance(text: string, metric: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    const instance = /instance="([^"]+)"/.exec(line)![1];
    out.set(instance, (out.get(instance) ?? 0) + Number(line.split(' ').at(-1)));
  }
  return out;
}

test.before(async () => {
  dir = tempDir();
  nats = await NatsServer.start();
  upstream = await ProviderServer.start();
  await start('registry', 'registry');
  await Promise.all([start('token-1', 'token'), start('token-2', 'token'), start('provider-1', 'provider'), start('provider-2', 'provider')]);
  edge = await start('edge', 'edge,admin');
  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  await cli(['user', 'add', 'alice'], env);
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }\n');
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'provider.yaml')], env);
  chat = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await upstream?.stop();
  await nats?.stop();
  cleanup(dir);
});

test.serial('tokens issued by either token replica work through either provider replica', async (t) => {
  // Until every app-visible cache has the install, the first calls may see 401 "unknown app key".
  const first = await until('a first access token, once the caches have the install', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  const tokens = [first];
  for (let i = 0; i < 15; i++) tokens.push(await accessToken(chat, { ...NOTES, ops: ['echo'] }));
  for (const token of tokens) {
    for (let k = 0; k < 2; k++) {
      const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}' });
      t.is(res.status, 201);
    }
  }
  const metrics = await (await fetch(`${edge.adminUrl}/metrics`)).text();
  const issued = perInstance(metrics, 'pier_tokens_issued_total');
  const calls = perInstance(metrics, 'pier_provider_calls_total');
  t.is(issued.size, 2, 'both token replicas issued tokens');
  t.is([...issued.values()].reduce((a, b) => a + b, 0), 16);
  t.is(calls.size, 2, 'both provider replicas called the provider');
  t.is([...calls.values()].reduce((a, b) => a + b, 0), 32);
});

test.serial('one provider replica killed: calls keep working on the other', async (t) => {
  const token = await accessToken(chat, { ...NOTES, ops: ['echo'] });
  const victim = procs.find((p) => p.proc.spawnargs.includes('provider'))!;
  await victim.stop('SIGKILL');
  for (let i = 0; i < 10; i++) {
    const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token);
    t.is(res.status, 201);
  }
});

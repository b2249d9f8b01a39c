import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { NatsServer } from '../helpers/nats-server.js';
import { until, within } from '../helpers/wait.js';

// docs/security.md "The bus": a message that fails its schema is refused and counted; it never crashes
// or wedges the receiver. A peer with the rights to publish (a buggy or compromised one) sends
// garbage to every subject Pier listens on.
let dir: string;
let nats: NatsServer;
let pier: PierProcess;
let nc: NatsConnection;

test.before(async () => {
  dir = tempDir();
  nats = await NatsServer.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { NATS_URL: nats.url, PIER_HEARTBEAT_MS: '250' }));
  nc = await connect({ servers: nats.url });
});

test.after.always(async () => {
  await nc?.close();
  await pier?.stop();
  await nats?.stop();
  cleanup(dir);
});

async function refusals(): Promise<number> {
  const text = await (await fetch(`${pier.adminUrl}/metrics`)).text();
  return [...text.matchAll(/^pier_bus_refusals_total\{[^}]*reason="(?:schema|undecodable|sealed)"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
}

test('garbage and schema-less messages on every subject Pier hears are refused and counted; everything still works', async (t) => {
  // Pier's own bus id, from its heartbeats: the per-process subjects carry it.
  const busId = await within(
    'a heartbeat of the Pier process',
    new Promise<string>((resolve) => {
      const sub = nc.subscribe('pier.process.heartbeat.*', {
        callback: (_err, m) => {
          sub.unsubscribe();
          resolve(decode<{ busId: string }>(m.data).busId);
        },
      });
    }),
  );
  const garbage = [randomBytes(64), encode({ op: 'explode', appId: { $gt: '' } }), encode('x'.repeat(10_000)), encode([1, 2, 3]), new Uint8Array([0xc1])];
  const before = await refusals();
  const heard = [
    'pier.registry.changes',
    'pier.registry.heartbeat',
    'pier.process.heartbeat.edge',
    'pier.process.heartbeat.vault',
    `pier.cb.hello.${busId}`,
    'pier.gw.list',
    `pier.gw.edge.${busId}`,
    `pier.gw.settled.${busId}`,
    `pier.cb.deliver.${busId}`,
    'pier.token.issue',
    'pier.vault.op',
    'pier.upload.create',
  ];
  for (const subject of heard) for (const g of garbage) nc.publish(subject, g, { reply: '_INBOX.nobody' });
  await nc.flush();
  // Every one of them is refused (some subjects are heard by several subscribers: at least one count each).
  await until('the refusals to be counted', async () => (await refusals()) >= before + heard.length * garbage.length, 10_000);
  t.is((await fetch(`http://127.0.0.1:${pier.ports!.public}/healthz`)).status, 200);
  t.true(pier.proc.exitCode === null && pier.proc.signalCode === null, `the process is up: ${pier.stderr}`);
  // The registry cache was not poisoned: the admin path and the registry still answer.
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const added = await cli(['user', 'add', 'alice', '--json'], env);
  t.is(added.code, 0, added.stderr);
  t.deepEqual((await cli(['user', 'list', '--json'], env)).json.map((u: { name: string }) => u.name), ['alice']);
});

test('a request whose reply subject is not an inbox is refused before any handler: a responder\'s answer cannot be aimed at another endpoint', async (t) => {
  const count = async () => {
    const text = await (await fetch(`${pier.adminUrl}/metrics`)).text();
    return [...text.matchAll(/^pier_bus_refusals_total\{[^}]*reason="reply"[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  };
  const before = await count();
  // The registry's snapshot would be published onto the user-add endpoint, with the registry's rights.
  const heardThere: string[] = [];
  const spy = nc.subscribe('pier.registry.user.add', { callback: (_e, m) => heardThere.push(m.subject) });
  nc.publish('pier.registry.snapshot', encode({}), { reply: 'pier.registry.user.add' });
  nc.publish('pier.gw.list', encode({ appId: 'alice/chat' }), { reply: 'pier.vault.op' });
  await nc.flush();
  await until('the two refusals to be counted', async () => (await count()) >= before + 2);
  spy.unsubscribe();
  t.deepEqual(heardThere, []);
});

test('a forged process report (any identity may answer a describe) is not summed into status or /metrics', async (t) => {
  const forged = { info: { id: 'ghost', busId: '000000000000', roles: ['vault', 'registry'], pid: 1, host: 'ghost', startedAt: '' }, counters: { connections: 1_000_000, uploads: -5 }, metrics: [], sig: 'A'.repeat(86) };
  const sub = nc.subscribe('pier.process.describe', { callback: (_e, m) => m.respond(encode(forged)) });
  t.teardown(() => sub.unsubscribe());
  await nc.flush();
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const viaCli = await cli(['status', '--json'], env);
  t.is(viaCli.code, 0, viaCli.stderr);
  t.false(viaCli.json.replicas.some((r: { id: string }) => r.id === 'ghost'), 'the forged process is not listed');
  t.true(viaCli.json.connections < 1_000_000, 'its counters are not summed');
  t.false((await (await fetch(`${pier.adminUrl}/metrics`)).text()).includes('ghost'));

});

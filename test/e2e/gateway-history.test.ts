import test from 'ava';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { connect, type Client } from '../helpers/ws-client.js';
import { WsApp } from '../helpers/ws-app.js';
import type { AppEnv } from '../helpers/app-client.js';
import { until } from '../helpers/wait.js';

// Gateway history and recovery in one process (docs/gateway.md "History and recovery"; the wire in
// docs/protocol.md): what an app sends its user is kept, a reconnecting connection that asks gets
// what it missed, once, in order, before live messages, or is told why not.

let pier: PierProcess;
let dir: string;
let env: Record<string, string>;
let app: WsApp;
let token: string;
const apps: Record<string, AppEnv> = {};

const manifest = (name: string, history = '') => `metadata: { name: ${name} }\noptions:\n  websocket: { url: /ws/message, port: ${app.port}${history} }\n`;

async function install(name: string, text: string): Promise<AppEnv> {
  const f = join(dir, `${name}.yaml`);
  writeFileSync(f, text);
  const r = await cli(['app', 'install', '--user', 'alice', '--manifest', f, '--json'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.json.env;
}

test.before(async () => {
  dir = tempDir();
  app = await WsApp.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_WS_REPLAY_BYTES_PER_MIN: '4096' }));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  await cli(['user', 'add', 'bob', '--json'], env);
  apps.chat = await install('chat', manifest('chat'));
  apps.short = await install('short', manifest('short', ', history: { messages: 2 }'));
  apps.quiet = await install('quiet', manifest('quiet', ', history: false'));
  apps.big = await install('big', manifest('big'));
});

test.after.always(async () => {
  await pier?.stop();
  await app?.stop();
  cleanup(dir);
});

const send = async (a: AppEnv, body: unknown) => {
  const res = await fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/send`, {
    method: 'POST',
    headers: { 'x-app-key': a.OS_APP_KEY, 'x-app-secret': a.OS_APP_SECRET, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as { data: { delivered: number; kept: boolean; offset?: number; epoch?: string } } };
};
const open = (name: string, recover?: string) => connect(pier.ports!.public, `${name}.alice.localhost`, { 'x-authorization': token }, recover === undefined ? '/ws' : `/ws?recover=${encodeURIComponent(recover)}`);
const frames = (c: Client) => c.received.map((f) => JSON.parse(f) as { event: string; data: Record<string, unknown> });
const recovery = async (c: Client) => (await until('the recovery frame', () => frames(c).find((f) => f.event === 'pier.recovery'), 5_000)).data as { recovered: boolean; epoch: string; offset: number; missed: number; reason?: string };
const closed = async (c: Client) => {
  c.ws.close(1000);
  await c.closed;
};

test.serial('a first connection that asks is told it starts anew; a kept message reaches it wrapped with its offset and a plain connection byte for byte', async (t) => {
  const plain = await open('chat');
  const asking = await open('chat', '');
  const r = await recovery(asking);
  t.like(r, { recovered: false, reason: 'new', offset: 0, missed: 0 });
  t.regex(r.epoch, /^[a-z0-9]+-[0-9a-f]{8}$/);
  const sent = await send(apps.chat, { users: ['alice'], payload: { text: 'one' } });
  t.is(sent.status, 200);
  t.like(sent.json.data, { delivered: 2, kept: true, epoch: r.epoch });
  t.true(sent.json.data.offset! > 0);
  await until('both connections got it', () => plain.received.length === 1 && asking.received.length === 2, 5_000);
  t.is(plain.received[0], '{"text":"one"}', 'the frame of a connection that did not ask is exactly the payload');
  t.is(asking.received[1], `{"event":"pier.message","data":{"offset":${sent.json.data.offset},"payload":{"text":"one"}}}`);
  await closed(plain);
  await closed(asking);
});

test.serial('offline for three sends, a connection comes back and gets them once, in order, before a live one; its open callback says so', async (t) => {
  const first = await open('chat', '');
  const start = await recovery(first);
  await closed(first);
  const offsets: number[] = [];
  for (const text of ['a', 'b', 'c']) offsets.push((await send(apps.chat, { users: ['alice'], payload: text })).json.data.offset!);
  t.deepEqual([...offsets].sort((x, y) => x - y), offsets, 'offsets grow');
  const back = await open('chat', `${start.epoch}:${start.offset}`);
  const r = await recovery(back);
  t.like(r, { recovered: true, missed: 3, offset: offsets[2], epoch: start.epoch });
  await send(apps.chat, { users: ['alice'], payload: 'd' });
  await until('the live one after the replay', () => back.received.length === 5, 5_000);
  t.deepEqual(frames(back).slice(1).map((f) => f.data.payload), ['a', 'b', 'c', 'd']);
  t.deepEqual(frames(back).slice(1, 4).map((f) => f.data.offset), offsets);
  const connId = await until('the open callback', () => app.accepted.filter((c) => c.body.action === 'open' && (c.body.data as { recovery?: { missed: number } }).recovery?.missed === 3).at(-1), 5_000);
  t.deepEqual(connId.body.data, { recovery: { recovered: true, since: start.offset, offset: offsets[2], missed: 3 } });
  await closed(back);
  // Asking again from where it stands: nothing missed.
  const again = await open('chat', `${start.epoch}:${frames(back).at(-1)!.data.offset}`);
  t.like(await recovery(again), { recovered: true, missed: 0 });
  await closed(again);
});

test.serial('more missed than the history keeps is a gap: the page is told to reload, and live messages go on', async (t) => {
  const first = await open('short', '');
  const start = await recovery(first);
  await closed(first);
  for (const text of ['1', '2', '3']) await send(apps.short, { users: ['alice'], payload: text });
  const back = await open('short', `${start.epoch}:${start.offset}`);
  const r = await recovery(back);
  t.like(r, { recovered: false, reason: 'gap', missed: 0 });
  await send(apps.short, { users: ['alice'], payload: '4' });
  await until('the live one', () => back.received.length === 2, 5_000);
  t.is(frames(back)[1].data.payload, '4');
  await closed(back);
});

test.serial('hostile: forged, foreign, future and malformed positions are answered "cannot recover", never an error', async (t) => {
  const first = await open('chat', '');
  const start = await recovery(first);
  await closed(first);
  // An offset another app's history gave, below this chain's last: not one this chain ever had.
  const foreign = (await send(apps.short, { users: ['alice'], payload: 'elsewhere' })).json.data.offset!;
  await send(apps.chat, { users: ['alice'], payload: 'after it' });
  const cases: Array<[string, string]> = [
    [`${start.epoch}:${start.offset + 1000}`, 'gap'],
    [`${start.epoch}:${foreign}`, 'gap'],
    [`zzzzzz-00000000:${start.offset}`, 'epoch'],
    ['not a position', 'gap'],
    [`${start.epoch}:${'9'.repeat(40)}`, 'gap'],
    ['x'.repeat(10_000), 'gap'],
  ];
  for (const [position, reason] of cases) {
    const c = await open('chat', position);
    t.like(await recovery(c), { recovered: false, reason }, position.slice(0, 40));
    await closed(c);
  }
});

test.serial('history off in the manifest: nothing kept, and the asking connection is told so', async (t) => {
  const c = await open('quiet', '');
  t.like(await recovery(c), { recovered: false, reason: 'off', epoch: null, offset: null });
  const sent = await send(apps.quiet, { users: ['alice'], payload: 'x' });
  t.deepEqual(sent.json.data, { delivered: 1, kept: false });
  await until('the message, wrapped without an offset', () => c.received.length === 2, 5_000);
  t.is(c.received[1], '{"event":"pier.message","data":{"payload":"x"}}');
  await closed(c);
});

test.serial('a message by conn_id is not kept; one too large to keep is delivered, and a replay across it is a gap', async (t) => {
  const c = await open('big', '');
  const start = await recovery(c);
  const connId = await until('the connection listed', async () => {
    const list = await (await fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': apps.big.OS_APP_KEY, 'x-app-secret': apps.big.OS_APP_SECRET } })).json();
    return (list.data as Array<{ conns: Array<{ id: string }> }>)[0]?.conns[0]?.id;
  }, 5_000);
  const direct = await send(apps.big, { conn_id: connId, payload: 'just you' });
  t.deepEqual(direct.json.data, { delivered: 1, kept: false });
  const large = await send(apps.big, { users: ['alice'], payload: 'x'.repeat(70 * 1024) });
  t.like(large.json.data, { delivered: 1, kept: false });
  await until('both delivered', () => c.received.length === 3, 5_000);
  await closed(c);
  const back = await open('big', `${start.epoch}:${start.offset}`);
  t.like(await recovery(back), { recovered: false, reason: 'gap' });
  await closed(back);
});

test.serial('sealed at rest: the history file holds no message in clear', async (t) => {
  await send(apps.chat, { users: ['alice'], payload: 'the-secret-marker-7f3a' });
  const folder = join(dir, 'data', 'gateway-history');
  const bytes = readdirSync(folder).map((f) => readFileSync(join(folder, f)));
  t.true(bytes.length > 0);
  t.false(bytes.some((b) => b.includes('the-secret-marker-7f3a')));
});

test.serial('a reinstalled app is a new epoch: the old install\'s history is never replayed', async (t) => {
  const first = await open('chat', '');
  const start = await recovery(first);
  await closed(first);
  await send(apps.chat, { users: ['alice'], payload: 'before' });
  t.is((await cli(['app', 'uninstall', '--user', 'alice', 'chat'], env)).code, 0);
  apps.chat = await install('chat', manifest('chat'));
  const back = await open('chat', `${start.epoch}:${start.offset}`);
  const r = await recovery(back);
  t.like(r, { recovered: false, reason: 'epoch', offset: 0 });
  t.not(r.epoch, start.epoch);
  await closed(back);
});

test.serial('hostile: a client replaying again and again is held to its user\'s budget (429), even asking anew; a plain upgrade is not', async (t) => {
  const first = await open('chat', '');
  const start = await recovery(first);
  await closed(first);
  for (let i = 0; i < 3; i++) await send(apps.chat, { users: ['alice'], payload: 'y'.repeat(3000) });
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) {
    try {
      const c = await open('chat', `${start.epoch}:${start.offset}`);
      await recovery(c);
      await closed(c);
      statuses.push(101);
    } catch (err) {
      statuses.push((err as { status?: number }).status ?? -1);
    }
  }
  t.deepEqual(statuses, [101, 429, 429]);
  const plain = await open('chat');
  await closed(plain);
  // Asking anew reads the history's head too: charged, so refused as well while the budget is spent.
  await t.throwsAsync(open('chat', ''), { message: /429/ });
});

// Before, only what was replayed was charged: a recovery that read and decrypted the whole history
// and then answered `gap`, or one naming a malformed position, cost its user nothing (200 of them
// cost a cluster edge 25.9 s of CPU, with no 429).
test.serial('hostile: recoveries that end in gap, and malformed ones, are charged to the user\'s budget (429)', async (t) => {
  const small = await PierProcess.start(pierEnv(join(dir, 'budget'), { PIER_WS_REPLAY_BYTES_PER_MIN: String(64 * 1024) }));
  t.teardown(() => small.stop());
  const smallEnv = { ...small.env, PIER_ADMIN_URL: small.adminUrl };
  const carol = (await cli(['user', 'add', 'carol', '--json'], smallEnv)).json.token;
  const f = join(dir, 'gappy.yaml');
  writeFileSync(f, `metadata: { name: gappy }\noptions:\n  websocket: { url: /ws/message, port: ${app.port}, history: { messages: 20 } }\n`);
  const gappy = (await cli(['app', 'install', '--user', 'carol', '--manifest', f, '--json'], smallEnv)).json.env as AppEnv;
  // 30 messages of 2 KB kept 20: from offset 0 the reader reads all 20 (decrypting them), then
  // finds the chain's first is not its first ever: gap.
  for (let i = 0; i < 30; i++) {
    const res = await fetch(`http://127.0.0.1:${small.ports!.local}/runtime/ws/conn/send`, {
      method: 'POST',
      headers: { 'x-app-key': gappy.OS_APP_KEY, 'x-app-secret': gappy.OS_APP_SECRET, 'content-type': 'application/json' },
      body: JSON.stringify({ users: ['carol'], payload: 'g'.repeat(2000) }),
    });
    t.is(res.status, 200);
  }
  const ask = async (position: string) => {
    try {
      const c = await connect(small.ports!.public, 'gappy.carol.localhost', { 'x-authorization': carol }, `/ws?recover=${encodeURIComponent(position)}`);
      const r = await recovery(c);
      await closed(c);
      return r.reason ?? 'recovered';
    } catch (err) {
      return String((err as { status?: number }).status ?? err);
    }
  };
  const head = await ask('');
  t.is(head, 'new');
  const epoch = (await (async () => {
    const c = await connect(small.ports!.public, 'gappy.carol.localhost', { 'x-authorization': carol }, '/ws?recover=');
    const r = await recovery(c);
    await closed(c);
    return r.epoch;
  })());
  const gaps: string[] = [];
  for (let i = 0; i < 5; i++) gaps.push(await ask(`${epoch}:0`));
  t.is(gaps[0], 'gap', 'the first reads 40 KB of history and ends in gap');
  t.true(gaps.includes('429'), `a few such recoveries spend the 64 KiB budget: ${gaps.join(',')}`);
  t.is(await ask('not a position'), '429', 'a malformed position is held to the budget too');
});

import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { connect, refusal } from '../helpers/ws-client.js';
import { verifySignature, WsApp, wsManifest } from '../helpers/ws-app.js';
import type { AppEnv } from '../helpers/app-client.js';
import { until } from '../helpers/wait.js';

let pier: PierProcess;
let dir: string;
let env: Record<string, string>;
let appA: WsApp;
let appB: WsApp;
const tokens: Record<string, string> = {};
const apps: Record<string, AppEnv> = {};

async function install(user: string, name: string, manifest: string): Promise<AppEnv> {
  const f = join(dir, `${user}-${name}.yaml`);
  writeFileSync(f, manifest);
  const r = await cli(['app', 'install', '--user', user, '--manifest', f, '--json'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.json.env;
}

test.before(async () => {
  dir = tempDir();
  appA = await WsApp.start();
  appB = await WsApp.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_WS_IDLE_MS: '1500', PIER_WS_OUTBOUND_BUFFER_BYTES: '65536' }));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  for (const u of ['alice', 'bob', 'carol']) tokens[u] = (await cli(['user', 'add', u, '--json'], env)).json.token;
  apps.chat = await install('alice', 'chat', wsManifest('chat', appA.port));
  apps.other = await install('alice', 'other', wsManifest('other', appB.port));
  apps.nows = await install('alice', 'nows', 'metadata: { name: nows }\n');
  apps.bobchat = await install('bob', 'chat', wsManifest('chat', appA.port));
});

test.after.always(async () => {
  await pier?.stop();
  await appA?.stop();
  await appB?.stop();
  cleanup(dir);
});

const port = () => pier.ports!.public;
const local = (path: string, app: AppEnv, body?: unknown) =>
  fetch(`http://127.0.0.1:${pier.ports!.local}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'x-app-key': app.OS_APP_KEY, 'x-app-secret': app.OS_APP_SECRET, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const connIdOf = async (app: AppEnv, user: string): Promise<string[]> => {
  const list = await (await local('/runtime/ws/conn/list', app)).json();
  return (list.data.find((u: { name: string }) => u.name === user)?.conns ?? []).map((c: { id: string }) => c.id);
};

test.serial('callbacks: bodies and headers exactly as the contract says; signature verifies', async (t) => {
  const c = await connect(port(), 'chat.alice.localhost', { cookie: `auth_token=${tokens.alice}; theme=dark`, 'user-agent': 'test-agent/1' });
  c.ws.send(JSON.stringify({ event: 'say', data: { text: 'hi' } }));
  c.ws.send('not json');
  c.ws.send(Buffer.from([0, 1, 2, 255]));
  c.ws.send(JSON.stringify({ event: 'ping', data: {} }));
  await appA.until(() => appA.accepted.length >= 4);
  const connId = appA.accepted[0].body.conn_id;
  c.ws.close(1000);
  await appA.until(() => appA.of(connId).length === 5);
  const calls = appA.of(connId);
  t.deepEqual(calls.map((k) => k.body), [
    { data: {}, action: 'open', user_name: 'alice', conn_id: connId },
    { data: { event: 'say', data: { text: 'hi' } }, action: 'message', user_name: 'alice', conn_id: connId },
    { data: { event: '', data: { raw: 'not json' } }, action: 'message', user_name: 'alice', conn_id: connId },
    { data: { event: '', data: { raw: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' } }, action: 'message', user_name: 'alice', conn_id: connId },
    { data: { events: 4 }, action: 'close', user_name: 'alice', conn_id: connId },
  ]);
  t.deepEqual(calls.map((k) => k.headers['x-pier-seq']), ['1', '2', '3', '4', '5']);
  t.deepEqual(calls.map((k) => k.headers['x-pier-event-id']), [...[1, 2, 3, 4].map((s) => `${connId}:${s}`), `${connId}:close`], 'the close has its own id (docs/gateway.md)');
  t.deepEqual(calls.map((k) => k.headers.cookie), [undefined, `auth_token=${tokens.alice}; theme=dark`, `auth_token=${tokens.alice}; theme=dark`, `auth_token=${tokens.alice}; theme=dark`, undefined]);
  t.true(calls.every((k) => verifySignature(k, apps.chat.OS_APP_SECRET)));
  t.false(verifySignature(calls[0], 'not-the-secret'));
  // Replays: the same signature for another event id, or once its time is outside the app's window.
  t.false(verifySignature({ ...calls[1], headers: { ...calls[1].headers, 'x-pier-event-id': calls[0].headers['x-pier-event-id'] } }, apps.chat.OS_APP_SECRET));
  t.false(verifySignature(calls[0], apps.chat.OS_APP_SECRET, 300, Math.floor(Date.now() / 1000) + 301));
  t.regex(String(calls[0].headers['x-pier-signature']), /^t=\d{10},v1=[0-9a-f]{64}$/);
  t.true(calls.every((k) => k.url === '/ws/message' && k.headers['content-type'] === 'application/json'));
  t.deepEqual(c.received, ['{"event":"pong"}'], 'ping answered with pong, not forwarded');
});

test.serial('upgrades refused: no, bad or revoked token; another user; foreign Origin; unknown app; app without websocket', async (t) => {
  const before = appA.accepted.filter((c) => c.body.action === 'open').length;
  const auth = { 'x-authorization': tokens.alice };
  t.is(await refusal(port(), 'chat.alice.localhost'), 401);
  t.is(await refusal(port(), 'chat.alice.localhost', { 'x-authorization': 'pier_bogus' }), 401);
  t.is(await refusal(port(), 'chat.bob.localhost', auth), 403, "alice's token on bob's app");
  t.is(await refusal(port(), 'chat.alice.localhost', { ...auth, origin: 'https://evil.example' }), 403);
  t.is(await refusal(port(), 'chat.alice.localhost', { ...auth, origin: 'https://chat.alice.localhost' }), 101, 'own origin accepted');
  t.is(await refusal(port(), 'ghost.alice.localhost', auth), 404);
  t.is(await refusal(port(), 'nows.alice.localhost', auth), 404);
  t.is(await refusal(port(), 'chat.alice.elsewhere.com', auth), 404);
  const carol = (await cli(['user', 'token', 'carol', '--json'], env)).json.token;
  await cli(['user', 'revoke', 'carol'], env);
  const status = await until('the revocation to reach the edge', async () => {
    const s = await refusal(port(), 'x.carol.localhost', { 'x-authorization': carol });
    return s === 101 ? undefined : s;
  });
  t.is(status, 401);
  // Only the one accepted upgrade reached the app. A refused upgrade makes no connection, so there is
  // no event of its own to wait for: a marker connection opened after all of them, and its message
  // delivered (after its open), shows the edge's events up to then have been handed on.
  const marker = await connect(port(), 'chat.alice.localhost', auth);
  marker.ws.send(JSON.stringify({ event: 'marker', data: { after: 'refusals' } }));
  const opens = () => appA.accepted.filter((c) => c.body.action === 'open').length;
  const markerCall = () => appA.accepted.find((c) => c.body.action === 'message' && JSON.stringify(c.body.data).includes('"after":"refusals"'));
  await appA.until(() => opens() >= before + 2 && markerCall() !== undefined, "the marker connection's open and message at the app");
  t.is(opens(), before + 2, 'the own-origin upgrade and the marker, nothing else');
  marker.ws.close();
  const markerId = markerCall()!.body.conn_id;
  await appA.until(() => appA.of(markerId).some((c) => c.body.action === 'close'), "the marker connection's close at the app");
});

test.serial('send to a connection and to users; close; list — and never across apps', async (t) => {
  const c1 = await connect(port(), 'chat.alice.localhost', { 'x-authorization': tokens.alice, 'user-agent': 'one' });
  const c2 = await connect(port(), 'chat.alice.localhost', { 'x-authorization': tokens.alice, 'user-agent': 'two' });
  const o = await connect(port(), 'other.alice.localhost', { 'x-authorization': tokens.alice });
  const ids = await connIdOf(apps.chat, 'alice');
  t.is(ids.length, 2);
  const list = await (await local('/runtime/ws/conn/list', apps.chat)).json();
  t.deepEqual(list.data[0].conns.map((c: { userAgent: string }) => c.userAgent).sort(), ['one', 'two']);
  t.is(list.partial, undefined);

  let r = await (await local('/runtime/ws/conn/send', apps.chat, { payload: { n: 1 }, conn_id: ids[0] })).json();
  t.like(r, { code: 0, message: 'success', data: { delivered: 1 } });
  r = await (await local('/runtime/ws/conn/send', apps.chat, { payload: [1, 'two'], users: ['alice', 'bob'] })).json();
  t.like(r.data, { delivered: 2 });
  r = await (await local('/runtime/ws/conn/send', apps.chat, { payload: 'x', users: ['carol'] })).json();
  t.like(r.data, { delivered: 0 });
  await until('the send to users at both connections', () => c1.received.includes('[1,"two"]') && c2.received.includes('[1,"two"]'));
  // One connection's frames arrive in the order sent: `{"n":1}` went out before `[1,"two"]`.
  t.is([...c1.received, ...c2.received].filter((m) => m === '{"n":1}').length, 1);

  // App "other" cannot reach chat's connections: unknown to it (404), closes nothing, lists nothing of them.
  const foreign = await local('/runtime/ws/conn/send', apps.other, { payload: 'x', conn_id: ids[0] });
  t.is(foreign.status, 404);
  t.deepEqual((await (await local('/runtime/ws/conn/close', apps.other, { conns: ids })).json()).data, { closed: 0 });
  const otherList = (await (await local('/runtime/ws/conn/list', apps.other)).json()).data;
  t.false(JSON.stringify(otherList).includes(ids[0]));
  t.like((await (await local('/runtime/ws/conn/send', apps.other, { payload: 'x', users: ['alice'] })).json()).data, { delivered: 1 }, 'only its own connection');
  t.is(o.received.length, 1);

  const closed = await (await local('/runtime/ws/conn/close', apps.chat, { conns: [ids[0]], users: ['alice'] })).json();
  t.deepEqual(closed.data, { closed: 2 });
  t.is((await c1.closed).code, 4001);
  t.is((await c2.closed).code, 4001);
  const gone = await local('/runtime/ws/conn/send', apps.chat, { payload: 'late', conn_id: ids[0] });
  t.is(gone.status, 404);
  await appA.until(() => ids.every((id) => appA.of(id).some((c) => c.body.action === 'close')));
  o.ws.close();
});

test('local API input: 400 naming the problem; 401 without or with wrong app credentials', async (t) => {
  const bad: Array<[unknown, string]> = [
    [{ payload: 1 }, 'give exactly one of conn_id and a non-empty users'],
    [{ payload: 1, conn_id: 'x', users: ['alice'] }, 'give exactly one of conn_id and a non-empty users'],
    [{ payload: 1, users: [] }, 'give exactly one of conn_id and a non-empty users'],
    [{ conn_id: 'x' }, 'payload: is required'],
    [{ payload: 1, users: ['Not Valid'] }, 'users[0]: must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes'],
  ];
  for (const [body, message] of bad) {
    const res = await local('/runtime/ws/conn/send', apps.chat, body);
    t.is(res.status, 400, JSON.stringify(body));
    t.is((await res.json()).message, message);
  }
  t.is((await (await local('/runtime/ws/conn/close', apps.chat, {})).json()).message, 'give a non-empty conns or users');
  const noAuth = await fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/list`);
  t.is(noAuth.status, 401);
  const wrong = await local('/runtime/ws/conn/list', { ...apps.chat, OS_APP_SECRET: 'wrong' });
  t.is(wrong.status, 401);
});

test('limits: oversized frame → 1009; silent client → 4000; slow reader → 4008; each gets its close callback', async (t) => {
  const big = await connect(port(), 'chat.alice.localhost', { 'x-authorization': tokens.alice });
  big.ws.send('x'.repeat(64 * 1024 + 1));
  t.is((await big.closed).code, 1009);

  const silent = await connect(port(), 'chat.alice.localhost', { 'x-authorization': tokens.alice });
  t.is((await silent.closed).code, 4000);

  const slow = await connect(port(), 'chat.alice.localhost', { 'x-authorization': tokens.alice, 'user-agent': 'slow-reader' });
  const list = (await (await local('/runtime/ws/conn/list', apps.chat)).json()).data;
  const slowId = list.find((u: { name: string }) => u.name === 'alice').conns.find((c: { userAgent: string }) => c.userAgent === 'slow-reader').id;
  (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  const chunk = 'y'.repeat(16 * 1024);
  let status = 200;
  // It reads nothing but keeps pinging (its socket still writes): only slowness can close it, not
  // the idle timer (1.5 s here), however long the kernel's buffers take to fill on a loaded machine.
  const alive = setInterval(() => slow.ws.send('{"event":"ping"}'), 300);
  try {
    for (let i = 0; i < 2000 && status === 200; i++) status = (await local('/runtime/ws/conn/send', apps.chat, { payload: chunk, conn_id: slowId })).status;
  } finally {
    clearInterval(alive);
  }
  t.is(status, 404, 'once closed for being slow, the connection is gone');
  (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
  t.is((await slow.closed).code, 4008);
  await appA.until(() => appA.of(slowId).some((c) => c.body.action === 'close'));
  t.pass();
});

test.serial('uninstall closes the app connections (4002) and each gets its close callback', async (t) => {
  const temp = await WsApp.start();
  t.teardown(() => temp.stop());
  await install('alice', 'temp', wsManifest('temp', temp.port));
  const c = await connect(port(), 'temp.alice.localhost', { 'x-authorization': tokens.alice });
  await temp.until(() => temp.accepted.length === 1);
  // The client pings while the CLI runs (a node process: seconds on a loaded machine), so only the
  // uninstall can close it, not the idle timer (1.5 s in this suite).
  const alive = setInterval(() => c.ws.send('{"event":"ping"}'), 300);
  try {
    await cli(['app', 'uninstall', '--user', 'alice', 'temp'], env);
    t.is((await c.closed).code, 4002);
  } finally {
    clearInterval(alive);
  }
  await temp.until(() => temp.accepted.some((k) => k.body.action === 'close'));
  t.deepEqual(temp.accepted.map((k) => k.body.action), ['open', 'close']);
});

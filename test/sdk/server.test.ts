import test from 'ava';
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CallbackReceiver,
  callbackKey,
  ConflictError,
  ForbiddenError,
  NotFoundError,
  PierApp,
  UnauthorizedError,
  traceHeaders,
  withTrace,
  type CallbackEvent,
  type Perm,
} from '@pier/sdk/server';
import { cleanup, cli, fixedPorts, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

/** Concrete ports, kept across restarts. */
let ports: Record<string, string> | undefined;
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { connect } from '../helpers/ws-client.js';
import { until } from '../helpers/wait.js';

/**
 * The server half of the SDK against a real Pier process (one process, the `npm start` shape):
 * tokens (cache, one request per perm, refresh across expiry with Pier's clock moved), provider
 * calls v1 and v2, the vault's typed answers, the gateway's local API, and callbacks verified.
 */
const NOTES_V2 = { dataType: 'legacy_notes', group: 'api.notes', version: 'v2' };
const NOTES_V1 = { dataType: 'legacy_things', group: 'api.things', version: 'v1' };

let dir: string;
let pier: PierProcess;
let upstream: ProviderServer;
let callbackServer: Server;
let env: Record<string, string>;
let chat: { OS_SYSTEM_SERVER: string; OS_APP_KEY: string; OS_APP_SECRET: string };
let userToken: string;
const events: CallbackEvent[] = [];
/** The trace the SDK's calls would send, as seen inside each onEvent. */
const tracesInHandler: Array<string | undefined> = [];
let receiverRefusals = 0;

/** Pier stopped and started again with its clock moved; the same data and ports. */
async function restartPier(clockOffsetMs: number): Promise<void> {
  await pier.stop();
  await startPier(clockOffsetMs);
}

/** Starts (or restarts, on the same ports, so clients made before still reach it) the Pier of this suite. */
async function startPier(clockOffsetMs = 0): Promise<void> {
  ports ??= await fixedPorts();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_CLOCK_OFFSET_MS: String(clockOffsetMs), PIER_WS_IDLE_MS: '600000', ...ports }));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  chat.OS_SYSTEM_SERVER = `127.0.0.1:${pier.ports!.system}`;
}

function app(options: { now?: () => number; onIssued?: (p: Perm) => void } = {}): PierApp {
  return PierApp.fromEnv({ ...chat, PIER_GATEWAY_URL: `http://127.0.0.1:${pier.ports!.local}` }, { tokens: { now: options.now, onIssued: options.onIssued, cost: 4 } });
}

test.before(async () => {
  dir = tempDir('pier-sdk-');
  upstream = await ProviderServer.start();
  chat = { OS_SYSTEM_SERVER: '', OS_APP_KEY: '', OS_APP_SECRET: '' };
  // The app's callback endpoint; its receiver is made once the install gave the app its secret.
  callbackServer = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => callbackServer.listen(0, '127.0.0.1', r));
  await startPier();
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'notes-provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES_V2, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(join(dir, 'things.yaml'), 'metadata: { name: things }\n');
  writeFileSync(join(dir, 'things-provider.yaml'), providerDoc('alice', 'provider-things-alice', upstream.port, { ...NOTES_V1, version: 'v1', ops: { getThing: '/v1/thing' } }));
  for (const a of ['notes', 'things']) {
    const r = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, `${a}.yaml`), '--provider', join(dir, `${a}-provider.yaml`)], env);
    if (r.code !== 0) throw new Error(r.stderr);
  }
  const port = (callbackServer.address() as { port: number }).port;
  writeFileSync(
    join(dir, 'chat.yaml'),
    [
      'metadata: { name: chat }',
      'permission:',
      '  sysData:',
      '    - { dataType: secret, group: secret.vault, version: v1, ops: ["RetrieveSecret?workspace=chat", "CreateSecret?workspace=chat", "UpdateSecret?workspace=chat", "DeleteSecret?workspace=chat", "ListSecret?workspace=chat"] }',
      '    - { appName: notes, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }',
      '    - { appName: things, version: v1, dataType: legacy_things, group: api.things, ops: [getThing] }',
      `options:\n  websocket: { url: /cb, port: ${port} }`,
      '',
    ].join('\n'),
  );
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  Object.assign(chat, installed.json.env);
  const real = new CallbackReceiver(
    chat.OS_APP_SECRET,
    (ev) => {
      events.push(ev);
      tracesInHandler.push(traceHeaders().traceparent);
    },
    { onRefused: () => void receiverRefusals++ },
  );
  handler = real.handler();
});

let handler: ReturnType<CallbackReceiver['handler']> = (_req, res) => void res.writeHead(503).end();

test.after.always(async () => {
  await pier?.stop();
  await upstream?.stop();
  callbackServer?.closeAllConnections();
  callbackServer?.close();
  cleanup(dir);
});

test.serial('fromEnv names the variable that is missing', (t) => {
  t.throws(() => PierApp.fromEnv({ OS_SYSTEM_SERVER: '127.0.0.1:1', OS_APP_KEY: 'k' }), { message: /^OS_APP_SECRET: is not set/ });
  t.throws(() => PierApp.fromEnv({ OS_SYSTEM_SERVER: 'http://127.0.0.1:1', OS_APP_KEY: 'k', OS_APP_SECRET: 's' }), { message: /systemServer: must be host:port without a scheme/ });
});

test.serial('the vault: create, get, update, list, delete, with typed errors', async (t) => {
  const vault = app().vault('chat');
  await vault.create('db-password', 's3cret');
  await t.throwsAsync(vault.create('db-password', 'again'), { instanceOf: ConflictError, message: /exists/ });
  t.deepEqual(await vault.get('db-password'), { name: 'db-password', value: 's3cret', env: 'prod' });
  await vault.update('db-password', 'rotated');
  await vault.create('api-key', 'k', 'dev');
  t.deepEqual(await vault.list(), [{ name: 'db-password', value: 'rotated', env: 'prod' }]);
  t.deepEqual((await vault.list('dev')).map((s) => s.name), ['api-key']);
  await vault.delete('db-password');
  const gone = await t.throwsAsync(vault.get('db-password'), { instanceOf: NotFoundError });
  t.is(gone.status, 404);
  t.is(gone.code, 404);
  // A workspace the manifest does not grant: the token itself is refused, naming the op.
  const other = await t.throwsAsync(app().vault('billing').get('x'), { instanceOf: ForbiddenError });
  t.regex(other.message, /RetrieveSecret\?workspace=billing/);
});

test.serial('provider calls: v2 passed through (streams both ways), v1 unwrapped', async (t) => {
  const notes = app().provider(NOTES_V2);
  const res = await notes.call('echo', 'hello', { headers: { 'content-type': 'text/plain' }, query: { page: '2' } });
  t.is(res.status, 201, "the provider's own status");
  t.is(res.headers.get('x-provider'), 'notes');
  const echoed = (await res.json()) as { body: string; url: string };
  t.is(echoed.body, 'hello');
  t.is(echoed.url, '/echo?page=2');
  const streamed = await notes.call('echo', new Blob(['from', ' a ', 'stream']).stream(), { headers: { 'content-type': 'text/plain' } });
  t.is(((await streamed.json()) as { body: string }).body, 'from a stream');
  t.deepEqual(await app().provider(NOTES_V1).callJson('getThing', { id: 7 }), { thing: 42, got: { op: 'getThing', datatype: 'legacy_things', version: 'v1', group: 'api.things', appkey: chat.OS_APP_KEY, data: { id: 7 } } });
  // An op the manifest does not grant: 403 from the token endpoint, typed.
  await t.throwsAsync(notes.call('delete'), { instanceOf: ForbiddenError });
});

test.serial('one token request per perm however many callers wait for it, then the cache', async (t) => {
  const issued: string[] = [];
  const a = app({ onIssued: (p) => issued.push(p.ops.join()) });
  const notes = a.provider(NOTES_V2);
  const answers = await Promise.all(Array.from({ length: 20 }, () => notes.call('echo', 'x').then((r) => r.status)));
  t.deepEqual([...new Set(answers)], [201]);
  t.deepEqual(issued, ['echo']);
  await notes.call('echo', 'again');
  t.deepEqual(issued, ['echo'], 'the cached token is used');
});

test.serial("tokens are refreshed before they expire and across expiry, on Pier's clock", async (t) => {
  let offset = 0;
  const issued: number[] = [];
  const a = app({ now: () => Date.now() + offset, onIssued: () => issued.push(offset) });
  const perm = { ...NOTES_V2, ops: ['echo'] };
  t.is((await a.provider(NOTES_V2).call('echo', 'x')).status, 201);
  const first = await a.tokens.get(perm);
  const direct = (token: string) => fetch(`http://${chat.OS_SYSTEM_SERVER}/system-server/v1alpha1/legacy_notes/api.notes/v2/echo`, { method: 'POST', body: 'x', headers: { 'x-access-token': token } }).then((r) => r.status);

  // 250 s later (Pier's clock and ours): 50 s left, inside the refresh margin, so a new one is taken early.
  t.teardown(() => restartPier(0));
  offset = 250_000;
  await restartPier(offset);
  t.is((await a.provider(NOTES_V2).call('echo', 'x')).status, 201);
  const second = await a.tokens.get(perm);
  t.not(second, first);
  t.is(await direct(first), 201, 'the old token still worked: the refresh came before its expiry');

  // Past the second token's five minutes: refreshed across expiry; Pier refuses the old one.
  offset = 560_000;
  await restartPier(offset);
  t.is((await a.provider(NOTES_V2).call('echo', 'x')).status, 201);
  t.is(await direct(second), 401, 'Pier no longer takes the expired token');
  t.deepEqual(issued, [0, 250_000, 560_000]);
});

test.serial('a reinstall with the same key keeps tokens; wrong credentials are a typed 401, not a retry loop', async (t) => {
  const issued: string[] = [];
  const a = app({ onIssued: (p) => issued.push(p.ops.join()) });
  t.is((await a.provider(NOTES_V2).call('echo', 'x')).status, 201);
  const creds = join(dir, 'creds.json');
  writeFileSync(creds, JSON.stringify({ OS_APP_KEY: chat.OS_APP_KEY, OS_APP_SECRET: chat.OS_APP_SECRET }));
  t.is((await cli(['app', 'uninstall', '--user', 'alice', 'chat'], env)).code, 0);
  t.is((await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--credentials', creds], env)).code, 0);
  t.is((await a.provider(NOTES_V2).call('echo', 'x')).status, 201);
  t.deepEqual(issued, ['echo'], 'the token names the same, installed key: still good');
  const wrong = PierApp.fromEnv({ ...chat, OS_APP_SECRET: 'not-the-secret-at-all' }, { tokens: { cost: 4 } });
  const err = await t.throwsAsync(wrong.provider(NOTES_V2).call('echo', 'x'), { instanceOf: UnauthorizedError });
  t.is(err.status, 401);
});

test.serial('a token Pier refuses before its time is replaced once, and a second refusal is answered, not retried', async (t) => {
  // A stand-in system server: tokens are "t1", "t2", ...; the call endpoint refuses those listed.
  let issuedCount = 0;
  const refused = new Set(['t1']);
  const calls: string[] = [];
  const fake = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/permission/v1alpha1/access') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ code: 0, message: 'success', data: { access_token: `t${++issuedCount}`, expired_at: new Date(Date.now() + 300_000).toISOString() } }));
      }
      const token = String(req.headers['x-access-token']);
      calls.push(token);
      if (refused.has(token)) return res.writeHead(401, { 'content-type': 'application/json' }).end('{"code":401,"message":"access token is not valid"}');
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  t.teardown(() => fake.close());
  const a = new PierApp({ systemServer: `127.0.0.1:${(fake.address() as { port: number }).port}`, appKey: 'ak', appSecret: 'secret', tokens: { cost: 4 } });
  const notes = a.provider(NOTES_V2);
  t.is((await notes.call('echo', 'x')).status, 200);
  t.deepEqual(calls, ['t1', 't2'], 'refused t1 dropped, the call sent once more with t2');
  refused.add('t2').add('t3');
  t.is((await notes.call('echo', 'x')).status, 401, 'the second refusal is the answer');
  t.deepEqual(calls, ['t1', 't2', 't2', 't3']);
  t.is(issuedCount, 3);
});

test.serial('the gateway: callbacks verified and in order; send, list and close through the local API', async (t) => {
  events.length = 0;
  tracesInHandler.length = 0;
  const a = app();
  const host = 'chat.alice.localhost';
  const client = await connect(pier.ports!.public!, host, { 'x-authorization': userToken });
  for (let i = 0; i < 5; i++) client.ws.send(JSON.stringify({ event: 'say', data: i }));
  await until('open and five messages delivered to the app', () => events.length >= 6, 10_000);
  const conn = events[0].connId;
  t.deepEqual(events.map((e) => e.action), ['open', 'message', 'message', 'message', 'message', 'message']);
  t.deepEqual(events.slice(1).map((e) => (e.data as { data: number }).data), [0, 1, 2, 3, 4]);
  t.deepEqual(events.map((e) => e.seq), [1, 2, 3, 4, 5, 6]);
  t.is(events[0].userName, 'alice');

  t.is(await a.gateway.send({ connId: conn }, { event: 'hi', data: 1 }), 1);
  t.is(await a.gateway.send({ users: ['alice', 'nobody'] }, { event: 'all' }), 1);
  await until('two frames at the browser', () => client.received.length >= 2, 5_000);
  t.deepEqual(client.received.slice(0, 2), ['{"event":"hi","data":1}', '{"event":"all"}']);
  const list = await a.gateway.list();
  t.deepEqual(list.users.map((u) => [u.name, u.conns.map((c) => c.id)]), [['alice', [conn]]]);
  t.false(list.partial);
  await t.throwsAsync(a.gateway.send({ connId: 'no-such-conn' }, {}), { instanceOf: NotFoundError });
  t.is(await a.gateway.close({ users: ['alice'] }), 1);
  t.is((await client.closed).code, 4001);
  await until('the close callback', () => events.some((e) => e.action === 'close'), 10_000);
  t.is(events.filter((e) => e.action === 'close').length, 1);
  t.is(receiverRefusals, 0);
});

test.serial('trace context passes through: a callback carries the upgrade\'s trace, and calls made in withTrace (as onEvent is run) send it on', async (t) => {
  events.length = 0;
  tracesInHandler.length = 0;
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const client = await connect(pier.ports!.public!, 'chat.alice.localhost', { 'x-authorization': userToken, traceparent });
  client.ws.send('traced');
  await until('the message callback', () => events.some((e) => e.action === 'message'), 10_000);
  const message = events.find((e) => e.action === 'message')!;
  t.deepEqual(message.trace, { traceparent });
  t.is(tracesInHandler[events.indexOf(message)], traceparent, 'onEvent runs in the event\'s trace');
  // What onEvent does runs in the event's trace: a provider call made there carries it on.
  const notes = app().provider(NOTES_V2);
  const res = await withTrace(message.trace, () => notes.call('echo', '{}'));
  t.is(res.status, 201);
  t.is(upstream.seen.at(-1)!.headers.traceparent, traceparent);
  await notes.call('echo', '{}');
  t.is(upstream.seen.at(-1)!.headers.traceparent, undefined, 'outside a trace, none is sent');
  client.ws.close();
});

test.serial('forged, stale, replayed and oversized callbacks are refused or absorbed, never handed on', async (t) => {
  const seen: CallbackEvent[] = [];
  const secret = 'app-secret-for-this-test';
  const receiver = new CallbackReceiver(secret, (ev) => void seen.push(ev), { maxBodyBytes: 1024 });
  const body = JSON.stringify({ data: {}, action: 'open', user_name: 'alice', conn_id: 'c1' });
  const signed = (t0: number, id: string, b: string, key = callbackKey(secret)) => ({
    'x-pier-event-id': id,
    'x-pier-seq': '1',
    'x-pier-signature': `t=${t0},v1=${createHmac('sha256', key).update(`${t0}.${id}.${b}`).digest('hex')}`,
  });
  const now = Math.floor(Date.now() / 1000);
  t.is(await receiver.receive(signed(now, 'e1', body), body), 200);
  t.is(await receiver.receive(signed(now, 'e1', body), body), 200, 'a retry (or replay) of a handled event is acknowledged');
  t.is(seen.length, 1, '... and not handed on twice');
  t.is(await receiver.receive(signed(now, 'e2', body, 'another-secret'), body), 401, 'signed with another key');
  t.is(await receiver.receive(signed(now, 'e2', body, secret), body), 401, 'signed with the app secret itself (before the callback key): refused');
  t.is(await receiver.receive(signed(now, 'e3', body), body.replace('alice', 'mallory')), 401, 'body changed after signing');
  t.is(await receiver.receive({ ...signed(now, 'e4', body), 'x-pier-event-id': 'e5' }, body), 401, 'signature moved to another event id');
  t.is(await receiver.receive(signed(now - 3600, 'e6', body), body), 401, 'an hour old');
  t.is(await receiver.receive({ 'x-pier-event-id': 'e7' }, body), 401, 'no signature');
  t.is(await receiver.receive({ 'x-pier-event-id': 'e8', 'x-pier-signature': 't=1,v1=' + 'z'.repeat(64) }, body), 401, 'malformed');
  const notEvent = JSON.stringify({ action: 'explode' });
  t.is(await receiver.receive(signed(now, 'e9', notEvent), notEvent), 400, 'signed but not an event');
  t.is(seen.length, 1);

  // Through the HTTP handler: a body over the limit is cut off with 413 before it is buffered.
  const server = createServer(receiver.handler());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/cb`;
    const big = await fetch(url, { method: 'POST', body: 'x'.repeat(64 * 1024), headers: signed(now, 'e10', 'x') }).catch(() => null);
    t.true(big === null || big.status === 413, `answered ${big?.status}`);
    const ok = await fetch(url, { method: 'POST', body, headers: signed(now, 'e11', body) });
    t.is(ok.status, 200);
    t.is(seen.length, 2);
  } finally {
    server.close();
  }
});

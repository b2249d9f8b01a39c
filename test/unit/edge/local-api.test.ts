import { at } from '../../../bus/exchange.js';
import { serve } from '../../../bus/verbs.js';
import test from 'ava';
import { PierError } from '../../../bus/errors.js';
import { gatewayChannels, gatewaySubjects, registry, type AppView, type ConnCommand } from '../../../bus/subjects.js';
import { PassedGates } from '../../../edge/identity/call-gate.js';
import { localApi, type LocalDeps } from '../../../edge/gateway/local-api.js';
import { refusal, request, responder, stubBus } from '../../helpers/edge-stubs.js';

// The app side of the gateway (docs/protocol.md "Gateway", port 40010): which app calls (its key and
// secret, checked by the registry), then the command sent to the edges holding the connections.

const app = { id: 'alice/chat', user: 'alice', name: 'chat', appKey: 'key-chat' } as AppView;
const creds = { 'x-app-key': 'key-chat', 'x-app-secret': 'secret-chat' };
const EDGE = '0123456789ab';
const CONN = `${EDGE}.${'A'.repeat(22)}`;

function setup(t: Parameters<typeof stubBus>[0], over: Partial<LocalDeps> = {}) {
  const bus = stubBus(t);
  const cache = { appByKey: (key: string) => (key === app.appKey ? app : undefined), app: (user: string, name: string) => (user === 'alice' && name === 'chat' ? app : undefined) };
  const deps = { bus, cache, peers: { alive: () => [{ id: EDGE }] }, sidecarApp: null, now: () => 1_000, verified: new PassedGates(), ...over } as unknown as LocalDeps;
  const verify = responder(bus, registry.appVerify, (req) => {
    if (req.secret !== 'secret-chat') throw new PierError('UNAUTHORIZED', 'wrong secret');
    return { app: app.id };
  });
  return { bus, api: localApi(deps), verify };
}

/** A fake edge holding connections: records each command and answers `count`. */
function holder(bus: ReturnType<typeof stubBus>, subject: string, count: number): ConnCommand[] {
  const seen: ConnCommand[] = [];
  serve(bus, at(gatewayChannels.command, subject), (cmd) => (seen.push(cmd), { count }));
  return seen;
}

test('no or wrong credentials are 401; after 20 failures from one address, 429', async (t) => {
  const { api, verify } = setup(t);
  const expected = { code: 'UNAUTHORIZED', message: 'X-App-Key and X-App-Secret are required and must match an installed app' };
  t.deepEqual(await refusal(t, api.list(request())), expected);
  t.deepEqual(await refusal(t, api.list(request({ headers: { ...creds, 'x-app-secret': 'guess' } }))), expected);
  t.is(verify.length, 1, 'an unknown key is refused without asking the registry');
  for (let i = 2; i < 20; i++) await api.list(request()).catch(() => undefined);
  t.deepEqual(await refusal(t, api.list(request())), { code: 'RATE_LIMITED', message: 'too many failed attempts; retry later' });
});

test('right credentials are confirmed by the registry once, then remembered', async (t) => {
  const { bus, api, verify } = setup(t);
  serve(bus, at(gatewayChannels.list, gatewaySubjects.list), () => ({ conns: [] }));
  await api.list(request({ headers: creds }));
  await api.list(request({ headers: creds }));
  t.deepEqual(verify, [{ appKey: 'key-chat', secret: 'secret-chat' }]);
});

test('send: exactly one of conn_id and users, else 400; a bad field is 400 naming it', async (t) => {
  const { api } = setup(t);
  const send = (body: object) => api.send(request({ method: 'post', headers: creds, body }));
  t.deepEqual(await refusal(t, send({ payload: 1 })), { code: 'BAD_REQUEST', message: 'give exactly one of conn_id and a non-empty users' });
  t.deepEqual(await refusal(t, send({ payload: 1, conn_id: CONN, users: ['alice'] })), { code: 'BAD_REQUEST', message: 'give exactly one of conn_id and a non-empty users' });
  t.regex((await refusal(t, send({ payload: 1, users: ['Not A User'] }))).message, /^users\[0\]: must be 1 to 31 characters: a lowercase letter/);
});

test('send to a connection goes to its edge only; a connection nobody holds is 404', async (t) => {
  const { bus, api } = setup(t);
  const seen = holder(bus, gatewaySubjects.edge(EDGE), 1);
  const reply = await api.send(request({ method: 'post', headers: creds, body: { conn_id: CONN, payload: { hi: 1 } } }));
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { delivered: 1, kept: false } });
  t.deepEqual(seen, [{ op: 'send', appId: 'alice/chat', text: '{"hi":1}', connIds: [CONN] }]);
  t.deepEqual(await refusal(t, api.send(request({ method: 'post', headers: creds, body: { conn_id: `ffffffffffff.${'B'.repeat(22)}`, payload: 1 } }))), { code: 'NOT_FOUND', message: `connection "ffffffffffff.${'B'.repeat(22)}" is not open` });
  t.deepEqual(await refusal(t, api.send(request({ method: 'post', headers: creds, body: { conn_id: 'not-a-conn-id', payload: 1 } }))), { code: 'NOT_FOUND', message: 'connection "not-a-conn-id" is not open' });
});

test("send to users goes to each user's subject once, and counts every holder's deliveries", async (t) => {
  const { bus, api } = setup(t);
  const a1 = holder(bus, gatewaySubjects.user('alice', 'chat'), 2);
  const a2 = holder(bus, gatewaySubjects.user('alice', 'chat'), 1);
  const b = holder(bus, gatewaySubjects.user('bob', 'chat'), 0);
  const reply = await api.send(request({ method: 'post', headers: creds, body: { users: ['alice', 'bob', 'alice'], payload: 'x' } }));
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { delivered: 3, kept: false } });
  t.deepEqual([a1.length, a2.length, b.length], [1, 1, 1]);
  t.deepEqual(b[0], { op: 'send', appId: 'alice/chat', text: '"x"', users: ['bob'] });
});

test('close: conns or users required (400); each connection closed once', async (t) => {
  const { bus, api } = setup(t);
  const seen = holder(bus, gatewaySubjects.edge(EDGE), 1);
  t.deepEqual(await refusal(t, api.close(request({ method: 'post', headers: creds, body: {} }))), { code: 'BAD_REQUEST', message: 'give a non-empty conns or users' });
  const reply = await api.close(request({ method: 'post', headers: creds, body: { conns: [CONN, CONN] } }));
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { closed: 1 } });
  t.deepEqual(seen, [{ op: 'close', appId: 'alice/chat', connIds: [CONN] }]);
});

test("list gathers every edge's connections of the app, by user, sorted", async (t) => {
  const { bus, api } = setup(t);
  const asked: unknown[] = [];
  serve(bus, at(gatewayChannels.list, gatewaySubjects.list), (req) => {
    asked.push(req);
    return { conns: [{ user: 'bob', id: 'c2', userAgent: 'b' }, { user: 'alice', id: 'c1', userAgent: 'a' }] };
  });
  const reply = await api.list(request({ headers: creds }));
  t.deepEqual(asked, [{ appId: 'alice/chat' }]);
  t.deepEqual(reply, { status: 200, json: { code: 0, message: 'success', data: [{ name: 'alice', conns: [{ id: 'c1', userAgent: 'a' }] }, { name: 'bob', conns: [{ id: 'c2', userAgent: 'b' }] }] } });
});

test('the sidecar serves its one app without headers; not installed is 503', async (t) => {
  const { bus, api, verify } = setup(t, { sidecarApp: { user: 'alice', app: 'chat' } });
  serve(bus, at(gatewayChannels.list, gatewaySubjects.list), () => ({ conns: [] }));
  t.is((await api.list(request())).status, 200);
  t.is(verify.length, 0);
  const other = setup(t, { sidecarApp: { user: 'alice', app: 'gone' } });
  t.deepEqual(await refusal(t, other.api.list(request())), { code: 'UNAVAILABLE', message: 'app alice/gone is not installed' });
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, callProvider, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { until } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';

// Tracing off (the default, issue #44): an incoming traceparent is passed on unchanged to the
// provider and the app's callbacks, and nothing else is done: none is made up when none came.
let dir: string;
let pier: PierProcess;
let upstream: ProviderServer;
let app: WsApp;
let chat: AppEnv;
let userToken: string;
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };

test.before(async () => {
  dir = tempDir();
  upstream = await ProviderServer.start();
  app = await WsApp.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(
    join(dir, 'chat.yaml'),
    `metadata: { name: chat }\noptions:\n  websocket: { url: /ws/message, port: ${app.port} }\npermission:\n  sysData:\n    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }\n`,
  );
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'provider.yaml')], env);
  chat = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
});

test.after.always(async () => {
  await pier?.stop('SIGKILL');
  await Promise.all([upstream?.stop(), app?.stop()]);
  cleanup(dir);
});

test.serial('a provider call passes the app\'s traceparent and tracestate on unchanged; without one, none is sent', async (t) => {
  const token = await until('an access token', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
  const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}', headers: { traceparent, tracestate: 'vendor=a1,other=b2' } });
  t.is(res.status, 201);
  t.is(upstream.seen.at(-1)!.headers.traceparent, traceparent);
  t.is(upstream.seen.at(-1)!.headers.tracestate, 'vendor=a1,other=b2');
  const plain = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}' });
  t.is(plain.status, 201);
  t.is(upstream.seen.at(-1)!.headers.traceparent, undefined, 'no trace made up with export off');
});

test.serial('hostile: a malformed traceparent is not passed on; an oversized tracestate is cut to its bound', async (t) => {
  const token = await until('an access token', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  for (const bad of ['00-00000000000000000000000000000000-b7ad6b7169203331-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'not a traceparent', `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01-extra`]) {
    const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}', headers: { traceparent: bad } });
    t.is(res.status, 201);
    t.is(upstream.seen.at(-1)!.headers.traceparent, undefined, `"${bad}" passed on`);
  }
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`;
  const members = Array.from({ length: 60 }, (_, i) => `k${i}=${'v'.repeat(20)}`).join(',');
  await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}', headers: { traceparent, tracestate: members } });
  const state = String(upstream.seen.at(-1)!.headers.tracestate);
  t.is(upstream.seen.at(-1)!.headers.traceparent, traceparent);
  t.true(state.length <= 512, `tracestate of ${state.length} characters`);
  t.true(state.split(',').length <= 32);
  t.true(state.startsWith('k0=') && !state.includes('k59='), 'the first members kept, the last dropped');
});

test.serial('a WebSocket upgrade\'s traceparent reaches the app with each of its callbacks, unchanged', async (t) => {
  const traceparent = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;
  const client = await until('the gateway to take the connection', () => connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': userToken, traceparent }).catch(() => undefined));
  client.ws.send('hello');
  await app.until(() => app.accepted.some((k) => k.body.action === 'message'), 'the message callback');
  const open = app.accepted.find((k) => k.body.action === 'open')!;
  const message = app.accepted.find((k) => k.body.action === 'message')!;
  t.is(open.headers.traceparent, traceparent);
  t.is(message.headers.traceparent, traceparent);
  client.ws.close();
});

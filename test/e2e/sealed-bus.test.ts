import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as natsConnect, type NatsConnection } from 'nats';
import { accessToken, callProvider, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { startJetStreamCluster, type NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';
import { connect as wsConnect } from '../helpers/ws-client.js';

// docs/security.md "The bus" (amended 2026-11-23): no secret crosses the bus in clear. A reader of
// every subject (an unrestricted identity on a server without accounts, so JetStream's own traffic
// and the state it stores pass under its eyes too) watches a full flow: user add, app install,
// access token, provider call, vault create/read/list, WebSocket messages with the platform's
// cookie, and an upload. No user token, app secret, access token or secret value is in any payload
// or header.
let dir: string;
let nodes: NatsServer[];
let pier: PierProcess;
let sniffer: NatsConnection;
const captured: Buffer[] = [];

test.before(async () => {
  dir = tempDir();
  nodes = await startJetStreamCluster(dir, 3);
  const url = nodes.map((n) => n.url).join(',');
  sniffer = await natsConnect({ servers: url.split(',') });
  sniffer.subscribe('>', {
    callback: (_e, m) => {
      captured.push(Buffer.from(m.data));
      if (m.headers) for (const k of m.headers.keys()) captured.push(Buffer.from(`${k}: ${m.headers.get(k)}`));
      if (m.reply) captured.push(Buffer.from(m.reply));
    },
  });
  await sniffer.flush();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { NATS_URL: url, PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3', PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250' }), [], 60_000);
});

test.after.always(async () => {
  await sniffer?.close();
  await pier?.stop('SIGKILL');
  await Promise.all((nodes ?? []).map((n) => n.stop()));
  cleanup(dir);
});

/** Where a secret was seen on the wire: as it is, and in base64 (a JSON view of bytes would use it). */
function seen(secret: string): number {
  const forms = [Buffer.from(secret), Buffer.from(Buffer.from(secret).toString('base64'))];
  return captured.filter((b) => forms.some((f) => b.includes(f))).length;
}

test('a reader of every subject learns no user token, app secret, access token or vault value during a full flow', async (t) => {
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const run = async (args: string[]) => {
    const r = await cli([...args, '--json'], env);
    if (r.code !== 0) throw new Error(`${args.join(' ')}: ${r.stderr}`);
    return r.json;
  };
  const userToken = (await run(['user', 'add', 'alice'])).token as string;
  const secondToken = (await run(['user', 'token', 'alice'])).token as string;

  // A provider app and an app that uses everything.
  const upstream = await ProviderServer.start();
  const app = await WsApp.start();
  t.teardown(async () => {
    await upstream.stop();
    await app.stop();
  });
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'notes-provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: { echo: '/echo' } }));
  const notes = (await run(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'notes-provider.yaml')])).env as AppEnv;
  writeFileSync(
    join(dir, 'chat.yaml'),
    [
      'metadata: { name: chat }',
      'permission:',
      '  sysData:',
      '    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, ListSecret?workspace=chat] }',
      '    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }',
      `options: { websocket: { url: /ws/message, port: ${app.port} } }`,
      'upload: { fileType: [bin], dest: /data/chat, limitedSize: 1048576 }',
      '',
    ].join('\n'),
  );
  const installed = await run(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')]);
  const chat = installed.env as AppEnv;

  // Access tokens, a provider call, the vault.
  const vaultAccess = await accessToken(chat, vaultPerm('chat', ['RetrieveSecret', 'CreateSecret', 'ListSecret']));
  const notesAccess = await accessToken(chat, { dataType: 'legacy_notes', group: 'api.notes', version: 'v2', ops: ['echo'] });
  const called = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', notesAccess, { method: 'POST', body: 'provider body', headers: { 'content-type': 'text/plain' } });
  t.is(called.status, 201);
  const value = `vault-value-${randomBytes(12).toString('hex')}`;
  const auth = { user: userToken, access: vaultAccess };
  t.is((await vaultCall(chat.OS_SYSTEM_SERVER, 'CreateSecret', 'chat', auth, { name: 'motto', value, env: 'prod' })).status, 200);
  const read = await vaultCall(chat.OS_SYSTEM_SERVER, 'RetrieveSecret', 'chat', auth, { name: 'motto', env: 'prod' });
  t.true(read.text.includes(value), 'the value is read back');
  t.is((await vaultCall(chat.OS_SYSTEM_SERVER, 'ListSecret', 'chat', auth, { env: 'prod' })).status, 200);

  // The gateway: the browser sends the platform's cookie, which the app gets in its callbacks.
  const cookie = `auth_token=${userToken}; theme=dark`;
  const ws = await wsConnect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': userToken, cookie });
  ws.ws.send(JSON.stringify({ hello: 'sealed' }));
  await app.until(() => app.accepted.some((c) => c.body.action === 'message'), 'the message at the app');
  t.true(app.accepted.some((c) => String(c.headers.cookie).includes(userToken)), 'the app got the cookie');
  ws.ws.close();

  // An upload.
  mkdirSync(installed.uploadDir, { recursive: true });
  const uploads = new UploadClient(pier.ports!.upload, 'chat.alice.localhost', userToken);
  const created = await until('the upload to be created', async () => {
    const r = await uploads.create({ storage_path: '/data/chat', file_relative_path: 'a.bin', file_type: 'bin', file_size: 4 });
    return r.status === 200 ? r : undefined;
  });
  t.is((await uploads.patch(created.json.data.id, 0, Buffer.from('abcd'))).status, 200);
  t.is(readFileSync(join(installed.uploadDir, 'a.bin'), 'utf8'), 'abcd');

  // Everything the bus carried, with no secret in it.
  await sniffer.flush();
  t.true(captured.length > 100, `the sniffer heard the flow (${captured.length} messages)`);
  const secrets = { userToken, secondToken, appSecret: chat.OS_APP_SECRET, providerAppSecret: notes.OS_APP_SECRET, vaultAccess, notesAccess, value };
  for (const [name, s] of Object.entries(secrets)) t.is(seen(s), 0, `${name} crossed the bus in clear`);
  // The check can see: what is not secret does cross (the app key, the provider call's body).
  t.true(seen(chat.OS_APP_KEY) > 0, 'the app key (not a secret) is seen');
  t.true(seen('provider body') > 0, 'the provider call body (app data) is seen');
});

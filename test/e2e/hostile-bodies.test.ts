import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import { accessToken, callProvider, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { within } from '../helpers/wait.js';

// Hardening item 10: provider and vault bodies (up to 8 MiB) were buffered before the access token
// was checked. Now the token is checked first and a refused body is never read.
let pier: PierProcess;
let upstream: ProviderServer;
let dir: string;
let app: AppEnv;
let userToken: string;
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };
const MiB = 1024 * 1024;

test.before(async () => {
  dir = tempDir();
  upstream = await ProviderServer.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'notes-provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { bytes: '/bytes' } }));
  const notes = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'notes-provider.yaml')], env);
  if (notes.code !== 0) throw new Error(notes.stderr);
  writeFileSync(
    join(dir, 'chat.yaml'),
    `metadata: { name: chat }
permission:
  sysData:
    - { appName: notes, version: v2, dataType: ${NOTES.dataType}, group: ${NOTES.group}, ops: [bytes] }
    - { dataType: secret, group: secret.vault, version: v1, ops: [CreateSecret?workspace=w, RetrieveSecret?workspace=w] }
`,
  );
  const chat = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (chat.code !== 0) throw new Error(chat.stderr);
  app = chat.json.env;
});

test.after.always(async () => {
  await pier?.stop();
  await upstream?.stop();
  cleanup(dir);
});

/**
 * Sends the head of a request declaring an almost-8 MiB body, and only 64 KiB of it: the answer
 * must come while the rest has not been sent (before, Pier waited to buffer it all).
 */
function headOnly(path: string, headers: Record<string, string>): Promise<number> {
  return within(
    `an answer to ${path} before the body was sent`,
    new Promise<number>((resolve, reject) => {
      const socket = tcpConnect(pier.ports!.system, '127.0.0.1');
      const head = [`POST ${path} HTTP/1.1`, 'host: 127.0.0.1', `content-length: ${8 * MiB - 1024}`, 'content-type: application/json', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
      socket.write(`${head.join('\r\n')}\r\n\r\n`);
      socket.write(Buffer.alloc(64 * 1024, 0x20));
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
        if (m) {
          socket.destroy();
          resolve(Number(m[1]));
        }
      });
      socket.on('error', reject);
    }),
    5_000,
  );
}

const providerPath = `/system-server/v1alpha1/${NOTES.dataType}/${NOTES.group}/${NOTES.version}/bytes?size=4096`;
const vaultPath = '/system-server/v1alpha1/secret/secret.vault/v1/CreateSecret?workspace=w';

test('provider calls: a missing, forged or ungranted token is refused before the body is read', async (t) => {
  t.is(await headOnly(providerPath, {}), 401, 'no token');
  t.is(await headOnly(providerPath, { 'x-access-token': 'pat1.forged.token' }), 401, 'forged token');
  const vaultOnly = await accessToken(app, vaultPerm('w', ['CreateSecret']));
  t.is(await headOnly(providerPath, { 'x-access-token': vaultOnly }), 403, 'a token for other ops');
  t.is(await headOnly(`/system-server/v1alpha1/legacy_none/api.none/v2/x`, { 'x-access-token': vaultOnly }), 403, 'an op the token does not name');
});

test('vault calls: a missing or forged token, or another user, is refused before the body is read', async (t) => {
  t.is(await headOnly(vaultPath, {}), 401, 'no token');
  t.is(await headOnly(vaultPath, { 'x-access-token': 'pat1.forged.token', 'x-authorization': userToken }), 401, 'forged token');
  const token = await accessToken(app, vaultPerm('w', ['RetrieveSecret']));
  t.is(await headOnly(vaultPath, { 'x-access-token': token }), 403, 'CreateSecret not granted by this token');
  t.is(await headOnly(vaultPath, { 'x-access-token': token, 'x-authorization': 'pier_not-a-user-token' }), 401, 'unknown user token');
});

test('a genuine token still gets its body read: 3 MiB through to the provider, a secret into the vault', async (t) => {
  const token = await accessToken(app, { ...NOTES, ops: ['bytes'] });
  const body = randomBytes(3 * MiB);
  for (let i = 0; i < 2; i++) {
    // Twice: the second call passes the gate from the edge's memory of the first.
    const r = await callProvider(app.OS_SYSTEM_SERVER, providerPath.slice('/system-server/v1alpha1/'.length), token, { method: 'POST', body });
    t.is(r.status, 200);
    t.is(r.headers.get('x-body-sha256'), createHash('sha256').update(body).digest('hex'), 'the provider got the whole body');
    await r.arrayBuffer();
  }
  const vault = await accessToken(app, vaultPerm('w', ['CreateSecret', 'RetrieveSecret']));
  t.is((await vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', { user: userToken, access: vault }, { name: 'k', value: 'v' })).status, 200);
  t.is((await vaultCall(app.OS_SYSTEM_SERVER, 'RetrieveSecret', 'w', { user: userToken, access: vault }, { name: 'k' })).json.data.data.value, 'v');
});

test('100 connections each declaring 8 MiB with no valid token: all refused at once, the process stays up', async (t) => {
  const statuses = await Promise.all(Array.from({ length: 100 }, (_, i) => headOnly(i % 2 ? providerPath : vaultPath, { 'x-access-token': `pat1.x${i}.y` })));
  t.deepEqual([...new Set(statuses)], [401]);
  t.is((await fetch(`http://127.0.0.1:${pier.ports!.system}/healthz`)).status, 200);
});

test('JSON bodies nested 6,000 levels deep are refused with 400, never parsed; the process stays up', async (t) => {
  const deep = `{"name":"k","value":${'['.repeat(6000)}${']'.repeat(6000)}}`;
  const refusal = { code: 400, message: 'body: JSON must not nest deeper than 64 levels' };
  const vault = await accessToken(app, vaultPerm('w', ['CreateSecret']));
  const v = await vaultCall(app.OS_SYSTEM_SERVER, 'CreateSecret', 'w', { user: userToken, access: vault }, deep);
  t.deepEqual([v.status, v.json], [400, refusal], 'vault');
  const access = await fetch(`http://${app.OS_SYSTEM_SERVER}/permission/v1alpha1/access`, { method: 'POST', body: deep });
  t.deepEqual([access.status, await access.json()], [400, refusal], 'access token request');
  const local = await fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/send`, {
    method: 'POST',
    headers: { 'x-app-key': app.OS_APP_KEY, 'x-app-secret': app.OS_APP_SECRET },
    body: `{"users":["alice"],"payload":${'['.repeat(6000)}${']'.repeat(6000)}}`,
  });
  t.deepEqual([local.status, await local.json()], [400, refusal], 'gateway local API');
  t.is((await fetch(`http://127.0.0.1:${pier.ports!.system}/healthz`)).status, 200);
});

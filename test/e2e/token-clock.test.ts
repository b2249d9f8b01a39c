import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { callProvider, requestAccess, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';

/**
 * Hashes made once by other bcrypt implementations, for credentials imported at install, with
 * Pier's clock set to the fixtures' timestamp. Two processes share the master key: tokens one
 * issues, the other verifies; the second's clock is 5 minutes and 1 second later.
 */
const fixture = JSON.parse(readFileSync(join(ROOT, 'test', 'fixtures', 'bcrypt-independent.json'), 'utf8'));
const masterKey = randomBytes(32).toString('hex');
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };
const offsetTo = (epochMs: number) => String(epochMs - Date.now());

let dir: string;
let upstream: ProviderServer;
const procs: PierProcess[] = [];

async function pierAt(name: string, clockMs: number): Promise<{ pier: PierProcess; chat: AppEnv }> {
  const data = join(dir, name);
  const pier = await PierProcess.start(pierEnv(data, { PIER_MASTER_KEY: masterKey, PIER_CLOCK_OFFSET_MS: offsetTo(clockMs) }));
  procs.push(pier);
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  await cli(['user', 'add', 'alice'], env);
  const files = { notes: join(dir, 'notes.yaml'), provider: join(dir, 'provider.yaml'), chat: join(dir, 'chat.yaml'), creds: join(dir, 'creds.json') };
  writeFileSync(files.notes, 'metadata: { name: notes }\n');
  writeFileSync(files.provider, providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(files.chat, `metadata: { name: chat }\npermission:\n  sysData:\n    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }\n`);
  writeFileSync(files.creds, JSON.stringify({ OS_APP_KEY: fixture.OS_APP_KEY, OS_APP_SECRET: fixture.OS_APP_SECRET }));
  await cli(['app', 'install', '--user', 'alice', '--manifest', files.notes, '--provider', files.provider], env);
  const chat = await cli(['app', 'install', '--user', 'alice', '--manifest', files.chat, '--credentials', files.creds, '--json'], env);
  if (chat.code !== 0) throw new Error(chat.stderr);
  return { pier, chat: chat.json.env };
}

test.before(async () => {
  dir = tempDir();
  upstream = await ProviderServer.start();
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop()));
  await upstream?.stop();
  cleanup(dir);
});

test.serial('hashes from independent bcrypt implementations ($2a$, $2b$, $2y$) are accepted; tokens expire after exactly 5 minutes', async (t) => {
  const issuedAt = fixture.timestamp * 1000;
  const { chat } = await pierAt('now', issuedAt);
  t.is(chat.OS_APP_KEY, fixture.OS_APP_KEY);
  const tokens: string[] = [];
  const expiries: number[] = [];
  for (const [name, hash] of Object.entries(fixture.hashes as Record<string, string>)) {
    const r = await requestAccess(chat.OS_SYSTEM_SERVER, { app_key: fixture.OS_APP_KEY, timestamp: fixture.timestamp, token: hash, perm: { ...NOTES, ops: ['echo'] } });
    t.is(r.status, 200, `${name}: ${JSON.stringify(r.json)}`);
    const claims = JSON.parse(Buffer.from(r.json.data.access_token.split('.')[1], 'base64url').toString());
    t.is(claims.exp - claims.iat, 300_000, `${name}: valid for exactly 5 minutes`);
    t.is(Date.parse(r.json.data.expired_at), claims.exp, `${name}: expired_at is the expiry`);
    tokens.push(r.json.data.access_token);
    expiries.push(claims.exp);
  }
  const here = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', tokens[0]);
  t.is(here.status, 201);

  // The same app (same credentials) on a process whose clock starts 1 s after the token's end.
  const { chat: later } = await pierAt('later', expiries[0] + 1_000);
  const res = await callProvider(later.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', tokens[0]);
  t.is(res.status, 401);
  t.deepEqual(await res.json(), { code: 401, message: 'access token has expired' });
  // And there the fixture's timestamp is now outside the window.
  const stale = await requestAccess(later.OS_SYSTEM_SERVER, { app_key: fixture.OS_APP_KEY, timestamp: fixture.timestamp, token: fixture.hashes.htpasswd_2y_cost10, perm: { ...NOTES, ops: ['echo'] } });
  t.is(stale.status, 401);
  t.is(stale.json.message, 'timestamp outside the accepted window');
});

test.serial('a token is still good a little before its 5 minutes end', async (t) => {
  const first = procs[0];
  const r = await requestAccess(`127.0.0.1:${first.ports!.system}`, { app_key: fixture.OS_APP_KEY, timestamp: fixture.timestamp, token: fixture.hashes.libxcrypt_2b_cost10, perm: { ...NOTES, ops: ['echo'] } });
  // A clock 20 s before the token's end (the call comes a moment after that process starts).
  const { chat: nearlyLater } = await pierAt('nearly', Date.parse(r.json.data.expired_at) - 20_000);
  const res = await callProvider(nearlyLater.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', r.json.data.access_token);
  t.is(res.status, 201);
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { accessToken, requestAccess, proof, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';

let pier: PierProcess;
let dir: string;
let env: Record<string, string>;
let sys: string;
const users: Record<string, string> = {};
const apps: Record<string, AppEnv> = {};

const vaultGrant = (ws: string) =>
  `    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=${ws}, CreateSecret?workspace=${ws}, UpdateSecret?workspace=${ws}, DeleteSecret?workspace=${ws}, ListSecret?workspace=${ws}] }\n`;

async function install(user: string, name: string, grants: string): Promise<AppEnv> {
  const file = join(dir, `${user}-${name}.yaml`);
  writeFileSync(file, `metadata: { name: ${name} }\n${grants ? `permission:\n  sysData:\n${grants}` : ''}`);
  const r = await cli(['app', 'install', '--user', user, '--manifest', file, '--json'], env);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.json.env;
}

test.before(async () => {
  dir = tempDir();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  sys = `127.0.0.1:${pier.ports!.system}`;
  for (const u of ['alice', 'bob']) users[u] = (await cli(['user', 'add', u, '--json'], env)).json.token;
  apps.chat = await install('alice', 'chat', vaultGrant('chat'));
  apps.mail = await install('alice', 'mail', vaultGrant('mail'));
  apps.plain = await install('alice', 'plain', '');
  apps.bobchat = await install('bob', 'chat', vaultGrant('chat'));
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

/** An access token for the app on its workspace, and the user's token. */
async function as(app: string, user: string, ws: string, ops?: string[]) {
  return { user: users[user], access: await accessToken(apps[app], vaultPerm(ws, ops)) };
}

test('every operation answers with the contract shape, byte for byte', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  const ws = 'chat';
  const empty = await vaultCall(sys, 'ListSecret', ws, auth, { env: 'staging' });
  t.is(empty.status, 200);
  t.is(empty.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":[]}}');
  const created = await vaultCall(sys, 'CreateSecret', ws, auth, { name: 'shape.b', value: 'two', env: 'staging' });
  t.is(created.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":""}}');
  t.is(created.version, '1');
  await vaultCall(sys, 'CreateSecret', ws, auth, { name: 'shape.a', value: 'one', env: 'staging' });
  const got = await vaultCall(sys, 'RetrieveSecret', ws, auth, { name: 'shape.b', env: 'staging' });
  t.is(got.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":{"name":"shape.b","value":"two","env":"staging"}}}');
  const updated = await vaultCall(sys, 'UpdateSecret', ws, auth, { name: 'shape.b', value: 'three', env: 'staging' });
  t.is(updated.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":""}}');
  t.is(updated.version, '2');
  const list = await vaultCall(sys, 'ListSecret', ws, auth, { env: 'staging' });
  t.is(list.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":[{"name":"shape.a","value":"one","env":"staging"},{"name":"shape.b","value":"three","env":"staging"}]}}');
  const deleted = await vaultCall(sys, 'DeleteSecret', ws, auth, { name: 'shape.a', env: 'staging' });
  t.is(deleted.text, '{"code":0,"message":"success","data":{"code":200,"message":"","data":""}}');
});

test('env defaults to prod', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  await vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'defaulted', value: 'p' });
  const got = await vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'defaulted', env: 'prod' });
  t.deepEqual(got.json.data.data, { name: 'defaulted', value: 'p', env: 'prod' });
});

test('errors: 400, 401, 403, 404, 405, 409, 413', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  await vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'exists', value: 'x', env: 'dev' });
  const cases: Array<[string, Promise<{ status: number; json: any }>, number, string]> = [
    ['bad name', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'no spaces', value: 'x' }), 400, 'name: must be 1-256 characters of [A-Za-z0-9_.-]'],
    ['name too long', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'n'.repeat(257), value: 'x' }), 400, 'name: must be 1-256 characters of [A-Za-z0-9_.-]'],
    ['missing value', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'x' }), 400, 'value: is required'],
    ['value not a string', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'x', value: 42 }), 400, 'value: must be a string'],
    ['unknown env', vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'x', env: 'qa' }), 400, 'env: must be one of test, dev, staging, prod'],
    ['not JSON', vaultCall(sys, 'CreateSecret', 'chat', auth, '{"name":'), 400, 'body: is not valid JSON'],
    ['no workspace', vaultCall(sys, 'ListSecret', '', auth, {}), 400, 'workspace: the query parameter must be 1-64 characters of [A-Za-z0-9_.-]'],
    ['no X-Access-Token', vaultCall(sys, 'ListSecret', 'chat', { ...auth, access: null }, {}), 401, 'X-Access-Token header is required'],
    ['unknown user token', vaultCall(sys, 'ListSecret', 'chat', { ...auth, user: 'pier_nope' }, {}), 401, 'user token is invalid or revoked'],
    ['garbage access token', vaultCall(sys, 'ListSecret', 'chat', { ...auth, access: 'garbage' }, {}), 401, 'access token is invalid'],
    ['absent', vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'absent' }), 404, 'secret "absent" not found in prod'],
    ['update absent', vaultCall(sys, 'UpdateSecret', 'chat', auth, { name: 'absent', value: 'x' }), 404, 'secret "absent" not found in prod'],
    ['delete absent', vaultCall(sys, 'DeleteSecret', 'chat', auth, { name: 'absent' }), 404, 'secret "absent" not found in prod'],
    ['unknown op', vaultCall(sys, 'ExportAll', 'chat', auth, {}), 404, 'no vault operation "ExportAll" (operations: RetrieveSecret, CreateSecret, UpdateSecret, DeleteSecret, ListSecret, ListSecretVersions, RetrieveSecretVersion, RestoreSecretVersion)'],
    ['GET', vaultCall(sys, 'ListSecret', 'chat', auth, {}, 'GET'), 405, 'vault operations take POST'],
    ['exists', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'exists', value: 'y', env: 'dev' }), 409, 'secret "exists" already exists in dev'],
    ['value over 64 KiB', vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'big', value: 'v'.repeat(64 * 1024 + 1) }), 413, 'value: must be at most 65536 bytes'],
  ];
  for (const [what, pending, status, message] of cases) {
    const r = await pending;
    t.is(r.status, status, what);
    t.is(r.json.code, status, what);
    t.is(r.json.message, message, what);
  }
  const exactly = await vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'big', value: 'v'.repeat(64 * 1024) });
  t.is(exactly.status, 200, 'a value of exactly 64 KiB is accepted');
});

test('isolation: workspace, env, user, app, grant — each refused, and no value in any message', async (t) => {
  const alice = await as('chat', 'alice', 'chat');
  await vaultCall(sys, 'CreateSecret', 'chat', alice, { name: 'iso', value: 'ISOLATED-VALUE-1', env: 'dev' });

  // Another env: not found, and not listed.
  t.is((await vaultCall(sys, 'RetrieveSecret', 'chat', alice, { name: 'iso', env: 'prod' })).status, 404);
  t.false((await vaultCall(sys, 'ListSecret', 'chat', alice, { env: 'test' })).text.includes('ISOLATED'));
  // A token for workspace chat used on workspace mail.
  const other = await vaultCall(sys, 'RetrieveSecret', 'mail', alice, { name: 'iso', env: 'dev' });
  t.is(other.status, 403);
  t.is(other.json.message, 'RetrieveSecret?workspace=mail is not granted by this access token');
  // A token for RetrieveSecret?workspace=chat only, used for ListSecret.
  const retrieveOnly = await as('chat', 'alice', 'chat', ['RetrieveSecret']);
  t.is((await vaultCall(sys, 'ListSecret', 'chat', retrieveOnly, { env: 'dev' })).status, 403);
  // Another user's X-Authorization with alice's app token.
  const bobUser = await vaultCall(sys, 'RetrieveSecret', 'chat', { user: users.bob, access: alice.access }, { name: 'iso', env: 'dev' });
  t.is(bobUser.status, 403);
  t.is(bobUser.json.message, 'the access token belongs to an app of another user');
  // Bob's own chat app on workspace chat sees bob's secrets, not alice's.
  const bob = await as('bobchat', 'bob', 'chat');
  t.is((await vaultCall(sys, 'RetrieveSecret', 'chat', bob, { name: 'iso', env: 'dev' })).status, 404);
  // Another app of alice (mail) cannot get a token for chat's workspace at all.
  const ts = Math.floor(Date.now() / 1000);
  const mailAsks = await requestAccess(sys, { app_key: apps.mail.OS_APP_KEY, timestamp: ts, token: await proof(apps.mail, ts), perm: vaultPerm('chat', ['RetrieveSecret']) });
  t.is(mailAsks.status, 403);
  // An app without any vault grant: refused too.
  const plainAsks = await requestAccess(sys, { app_key: apps.plain.OS_APP_KEY, timestamp: ts, token: await proof(apps.plain, ts), perm: vaultPerm('chat', ['RetrieveSecret']) });
  t.is(plainAsks.status, 403);
  // A token of another app (mail, for its own workspace) used on chat's workspace.
  const mail = await as('mail', 'alice', 'mail');
  t.is((await vaultCall(sys, 'RetrieveSecret', 'chat', mail, { name: 'iso', env: 'dev' })).status, 403);

  for (const r of [other, bobUser]) t.false(r.text.includes('ISOLATED-VALUE'));
});

test('a revoked user token is refused', async (t) => {
  const carol = (await cli(['user', 'add', 'carol', '--json'], env)).json.token;
  users.carol = carol;
  apps.carolchat = await install('carol', 'chat', vaultGrant('chat'));
  const auth = await as('carolchat', 'carol', 'chat');
  t.is((await vaultCall(sys, 'ListSecret', 'chat', auth, {})).status, 200);
  await cli(['user', 'revoke', 'carol'], env);
  const status = await until('the revocation to reach the vault', async () => {
    const s = (await vaultCall(sys, 'ListSecret', 'chat', auth, {})).status;
    return s === 200 ? undefined : s;
  });
  t.is(status, 401);
});

test('concurrency: 100 distinct creates all succeed; 20 creates of one name: exactly one; check-and-set: exactly one', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  const distinct = await Promise.all(Array.from({ length: 100 }, (_, i) => vaultCall(sys, 'CreateSecret', 'chat', auth, { name: `many-${i}`, value: `v${i}`, env: 'test' })));
  t.deepEqual(distinct.map((r) => r.status), Array(100).fill(200));
  const list = await vaultCall(sys, 'ListSecret', 'chat', auth, { env: 'test' });
  t.is(list.json.data.data.filter((s: { name: string }) => s.name.startsWith('many-')).length, 100);

  const same = await Promise.all(Array.from({ length: 20 }, (_, i) => vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'contended', value: `v${i}`, env: 'test' })));
  t.is(same.filter((r) => r.status === 200).length, 1);
  t.is(same.filter((r) => r.status === 409).length, 19);

  const cas = await Promise.all(Array.from({ length: 10 }, (_, i) => vaultCall(sys, 'UpdateSecret', 'chat', auth, { name: 'contended', value: `cas${i}`, env: 'test', version: 1 })));
  t.is(cas.filter((r) => r.status === 200).length, 1);
  t.is(cas.filter((r) => r.status === 409).length, 9);
  const winner = cas.findIndex((r) => r.status === 200);
  const now = await vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'contended', env: 'test' });
  t.is(now.json.data.data.value, `cas${winner}`);
  t.is(now.version, '2');
});

test('every operation is audited, allowed or refused, and the audit never holds a value', async (t) => {
  const auth = await as('mail', 'alice', 'mail');
  await vaultCall(sys, 'CreateSecret', 'mail', auth, { name: 'audited', value: 'AUDIT-SECRET-VALUE' });
  await vaultCall(sys, 'CreateSecret', 'mail', auth, { name: 'audited', value: 'AUDIT-SECRET-VALUE' });
  await vaultCall(sys, 'RetrieveSecret', 'mail', { ...auth, user: users.bob }, { name: 'audited' });
  const r = await cli(['vault', 'audit', '--user', 'alice', '--limit', '10000', '--json'], env);
  t.is(r.code, 0, r.stderr);
  const mine = r.json.filter((e: { workspace: string; name: string }) => e.workspace === 'mail' && e.name === 'audited');
  t.deepEqual(mine.map((e: { op: string; outcome: string }) => `${e.op}:${e.outcome}`).sort(), ['CreateSecret:CONFLICT', 'CreateSecret:ok']);
  t.deepEqual(Object.keys(mine[0]).sort(), ['app', 'at', 'env', 'name', 'op', 'outcome', 'user', 'workspace']);
  const bobs = await cli(['vault', 'audit', '--user', 'bob', '--limit', '10000', '--json'], env);
  t.true(bobs.json.some((e: { op: string; outcome: string; app: string }) => e.op === 'RetrieveSecret' && e.outcome === 'FORBIDDEN' && e.app === 'mail'));
  t.false(r.stdout.includes('AUDIT-SECRET-VALUE'));
});

test.serial('1,000 random values: none, nor any 16-byte piece of one, is in any file under the data dir or in the logs', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  const values = Array.from({ length: 1000 }, () => randomBytes(24).toString('base64url'));
  for (let i = 0; i < values.length; i += 50) {
    const batch = values.slice(i, i + 50).map((value, k) => vaultCall(sys, 'CreateSecret', 'chat', auth, { name: `leak-${i + k}`, value, env: 'prod' }));
    t.true((await Promise.all(batch)).every((r) => r.status === 200));
  }
  const pieces = new Set<string>();
  for (const v of values) for (let o = 0; o + 16 <= v.length; o++) pieces.add(v.slice(o, o + 16));
  const files: string[] = [];
  const walk = (d: string) => {
    for (const f of readdirSync(d)) {
      const p = join(d, f);
      if (statSync(p).isDirectory()) walk(p);
      else files.push(p);
    }
  };
  walk(join(dir, 'data'));
  let scanned = 0;
  for (const f of [...files, 'logs']) {
    const text = f === 'logs' ? pier.logs : readFileSync(f).toString('latin1');
    scanned += text.length;
    let leaked: string | undefined;
    for (let o = 0; o + 16 <= text.length && !leaked; o++) if (pieces.has(text.slice(o, o + 16))) leaked = text.slice(o, o + 16);
    t.is(leaked, undefined, `a value piece in ${f}`);
  }
  t.true(scanned > 100_000, 'the scan read the stores');
});

test.serial('a ciphertext copied onto another record fails to decrypt: 500 and an audit entry, not a crash', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  await vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'victim', value: 'victim-value', env: 'dev' });
  await vaultCall(sys, 'CreateSecret', 'chat', auth, { name: 'source', value: 'source-value', env: 'dev' });
  // Another process writes to the same LMDB environment (as LMDB allows), moving the ciphertext.
  const root = open({ path: join(dir, 'data', 'vault'), compression: false });
  const secrets = root.openDB<any, string>({ name: 'secrets' });
  const key = (n: string) => ['alice', 'chat', 'dev', n].join('\u0000');
  await secrets.put(key('victim'), { ...secrets.get(key('victim')), sealed: secrets.get(key('source')).sealed });
  await root.close();

  const r = await vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'victim', env: 'dev' });
  t.is(r.status, 500);
  t.is(r.text, '{"code":500,"message":"secret could not be decrypted"}');
  const audit = await cli(['vault', 'audit', '--user', 'alice', '--limit', '50', '--json'], env);
  t.true(audit.json.some((e: { name: string; outcome: string }) => e.name === 'victim' && e.outcome === 'INTERNAL'));
  t.is((await vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: 'source', env: 'dev' })).json.data.data.value, 'source-value');
});

test.serial('secrets survive uninstall, and go with uninstall --purge', async (t) => {
  const grant = vaultGrant('tempws');
  apps.temp = await install('alice', 'temp', grant);
  let auth = await as('temp', 'alice', 'tempws');
  await vaultCall(sys, 'CreateSecret', 'tempws', auth, { name: 'kept', value: 'k' });
  await cli(['app', 'uninstall', '--user', 'alice', 'temp'], env);
  apps.temp = await install('alice', 'temp', grant);
  auth = await as('temp', 'alice', 'tempws');
  t.is((await vaultCall(sys, 'RetrieveSecret', 'tempws', auth, { name: 'kept' })).json.data.data.value, 'k');
  await cli(['app', 'uninstall', '--user', 'alice', 'temp', '--purge'], env);
  apps.temp = await install('alice', 'temp', grant);
  auth = await as('temp', 'alice', 'tempws');
  const status = await until('the purge to reach the vault', async () => {
    const s = (await vaultCall(sys, 'RetrieveSecret', 'tempws', auth, { name: 'kept' })).status;
    return s === 200 ? undefined : s;
  });
  t.is(status, 404);
});

test.serial('hostile: requests without a valid access token are counted, not audited; the file does not grow with them', async (t) => {
  const before = (await cli(['vault', 'audit', '--limit', '100000', '--json'], env)).json.length;
  const sizeBefore = statSync(join(dir, 'data', 'vault', 'data.mdb')).size;
  for (let i = 0; i < 2000; i += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, k) => vaultCall(sys, 'RetrieveSecret', 'chat', { user: null, access: k % 2 ? 'garbage' : null }, { name: `flood-${i + k}` })));
  }
  const after = (await cli(['vault', 'audit', '--limit', '100000', '--json'], env)).json.length;
  t.is(after, before, 'no audit row for anonymous requests');
  t.true(statSync(join(dir, 'data', 'vault', 'data.mdb')).size - sizeBefore < 64 * 1024, 'the vault file did not grow with them');
  const metrics = await (await fetch(`${pier.adminUrl}/metrics`)).text();
  const counted = metrics.split('\n').filter((l) => l.startsWith('pier_vault_anonymous_refusals_total{')).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
  t.true(counted >= 2000, `counted in metrics: ${counted}`);
});

test.serial('hostile: a name with newlines, tabs and ANSI escapes is stored as sent and printed escaped', async (t) => {
  const auth = await as('chat', 'alice', 'chat');
  const forged = 'x\n2099-01-01T00:00:00.000Z\tbob\tchat\tDeleteSecret\tchat\tprod\tall\tok\u001b[2J\u001b[H';
  const r = await vaultCall(sys, 'RetrieveSecret', 'chat', auth, { name: forged });
  t.is(r.status, 400, 'the name is refused');
  const json = await cli(['vault', 'audit', '--user', 'alice', '--limit', '5', '--json'], env);
  t.true(json.json.some((e: { name: string }) => e.name === forged), 'the refused, authenticated request is audited with the name as sent');
  const text = await cli(['vault', 'audit', '--user', 'alice', '--limit', '5'], env);
  t.is(text.code, 0);
  t.false(/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text.stdout), 'no control character reaches the terminal');
  t.false(text.stdout.split('\n').some((line) => line.startsWith('2099-01-01')), 'no forged row');
  t.true(text.stdout.includes('\\x1b[2J'));
});

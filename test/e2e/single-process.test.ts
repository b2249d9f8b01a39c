import test from 'ava';
import { cliJson } from '../helpers/admin.js';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { ROLES } from '../../lib/config/config.js';

const example = (name: string) => join(ROOT, 'examples', name);

/** One `pier start` (in-process bus) for the whole file; tests use distinct user names. */
let pier: PierProcess;
let dir: string;
let env: Record<string, string>;
let token: string;

test.before(async () => {
  dir = tempDir();
  pier = await PierProcess.start(pierEnv(dir));
  token = readFileSync(join(dir, 'admin.token'), 'utf8').trim();
  env = { ...pierEnv(dir), PIER_ADMIN_URL: pier.adminUrl };
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

const admin = (path: string, init: RequestInit = {}, auth: string | null = token) =>
  fetch(`${pier.adminUrl}${path}`, { ...init, headers: { ...(auth === null ? {} : { authorization: `Bearer ${auth}` }), ...(init.headers ?? {}) } });

test.serial('user add and app install print the documents of contract section 8; restart keeps them', async (t) => {
  const user = await cliJson('user add', ['alice'], env);
  t.is(user.code, 0, user.stderr);
  t.deepEqual(Object.keys(user.json).sort(), ['name', 'token']);
  t.is(user.json.name, 'alice');

  const app = await cliJson('app install', ['--user', 'alice', '--manifest', example('PlatformManifest.yaml')], env);
  t.is(app.code, 0, app.stderr);
  // uploadDir alone: its 0.1 name `uploadDir` went in 0.3 (CHANGELOG.md).
  t.deepEqual(Object.keys(app.json).sort(), ['app', 'env', 'uploadDir', 'user']);
  // The manifest's dest `/data/chat`, under alice's folder of the default upload root `<data>/files`.
  t.is(app.json.uploadDir, join(dir, 'files', 'alice', 'data', 'chat'));
  t.true(statSync(app.json.uploadDir ?? '(none)').isDirectory(), 'install created the folder');
  t.is(app.json.app, 'chat');
  t.is(app.json.user, 'alice');
  t.deepEqual(Object.keys(app.json.env).sort(), ['OS_APP_KEY', 'OS_APP_SECRET', 'OS_SYSTEM_SERVER']);
  t.is(app.json.env.OS_SYSTEM_SERVER, `127.0.0.1:${pier.ports!.system}`);
  t.is(app.stdout.trim().split('\n').length, 1, '--json prints exactly one document');

  const provider = await cliJson('app install', ['--user', 'alice', '--manifest', example('notes-manifest.yaml'), '--provider', example('ProviderRegistry.yaml')], env);
  t.is(provider.code, 0, provider.stderr);
  t.is(provider.json.uploadDir, null, 'no upload option, no folder');

  await pier.stop();
  pier = await PierProcess.start(pierEnv(dir));
  env = { ...env, PIER_ADMIN_URL: pier.adminUrl };

  const users = await cliJson('user list', [], env);
  t.deepEqual(users.json.map((u: { name: string }) => u.name), ['alice']);
  const apps = await cliJson('app list', ['--user', 'alice'], env);
  t.deepEqual(apps.json.map((a: { app: string }) => a.app), ['chat', 'notes']);
  t.is(apps.json[0].appKey, app.json.env.OS_APP_KEY);
  const providers = await cliJson('provider list', [], env);
  t.deepEqual(providers.json.map((p: { name: string; state: string }) => `${p.name}:${p.state}`), ['provider-notes-alice:active']);
});

test('a second install of the same app is 409: one line on stderr, non-zero exit, nothing changed', async (t) => {
  await cliJson('user add', ['dave'], env);
  const first = await cliJson('app install', ['--user', 'dave', '--manifest', example('PlatformManifest.yaml')], env);
  t.is(first.code, 0);
  const second = await cliJson('app install', ['--user', 'dave', '--manifest', example('PlatformManifest.yaml')], env);
  t.is(second.code, 6, 'conflict');
  t.is(second.stdout, '');
  t.deepEqual(JSON.parse(second.stderr), { error: { status: 409, code: 'CONFLICT', message: 'app "chat" is already installed for user "dave" (409)' } });
  const apps = await cliJson('app list', ['--user', 'dave'], env);
  t.is(apps.json[0].appKey, first.json.env.OS_APP_KEY);
});

test('bad input through the CLI: each a clear one-line error', async (t) => {
  const dir2 = tempDir();
  t.teardown(() => cleanup(dir2));
  const bad = join(dir2, 'bad.yaml');
  writeFileSync(bad, 'metadata:\n  name: Bad_Name\n');
  await cli(['user', 'add', 'erin'], env);
  const cases: Array<[string[], RegExp]> = [
    [['user', 'add', 'Not-Valid'], /^pier: name: must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes \(400\)\n$/],
    [['app', 'install', '--user', 'erin', '--manifest', bad], /^pier: manifest: metadata\.name: must be 1 to 31 characters: a lowercase letter, then lowercase letters or digits \(no dashes\) \(400\)\n$/],
    [['app', 'install', '--user', 'erin', '--manifest', join(dir2, 'missing.yaml')], /^pier: --manifest: cannot read .*missing\.yaml \(ENOENT\)\n$/],
    [['app', 'install', '--user', 'nobody', '--manifest', example('PlatformManifest.yaml')], /^pier: user "nobody" not found \(404\)\n$/],
    [['app', 'uninstall', '--user', 'erin', 'ghost'], /^pier: app "ghost" is not installed for user "erin" \(404\)\n$/],
    [['provider', 'suspend', 'ghost'], /^pier: provider "ghost" not found \(404\)\n$/],
    [['user', 'frobnicate'], /^pier: "user frobnicate" is not a command; user has: user add, user token, user revoke, user list\n$/],
    [['nothing'], /^pier: unknown command "nothing"; see pier help\n$/],
    [['usr', 'add', 'erin'], /^pier: unknown command "usr add erin" \(did you mean "user add"\?\); see pier help\n$/],
    [['user', 'add', 'x', '--bogus'], /^pier: unknown flag --bogus; see pier help COMMAND for a command's flags\n$/],
    [['user', 'list', '--jsno'], /^pier: unknown flag --jsno \(did you mean --json\?\); see pier help COMMAND for a command's flags\n$/],
  ];
  for (const [args, expected] of cases) {
    const r = await cli(args, env);
    t.not(r.code, 0, args.join(' '));
    t.regex(r.stderr, expected, args.join(' '));
    t.is(r.stderr.trim().split('\n').length, 1, `one line: ${args.join(' ')}`);
  }
  // A group alone is a question, not a mistake: its commands, each with what it does.
  const group = await cli(['user'], env);
  t.is(group.code, 2);
  for (const c of ['pier user add NAME', 'pier user token NAME', 'pier user revoke NAME', 'pier user list']) t.true(group.stderr.includes(c), c);
});

test('the CLI without a reachable admin API says so in one line', async (t) => {
  const r = await cliJson('user list', [], { ...env, PIER_ADMIN_URL: 'http://127.0.0.1:9' });
  t.is(r.code, 3, 'unreachable');
  // With --json the failure is one JSON document, naming the variable the address came from.
  const failure = JSON.parse(r.stderr);
  t.is(failure.error.code, 'UNREACHABLE');
  t.regex(failure.error.message, /^cannot reach the admin API at http:\/\/127\.0\.0\.1:9 \(.*; from PIER_ADMIN_URL\)/);
  const human = await cli(['user', 'list'], { ...env, PIER_ADMIN_URL: 'http://127.0.0.1:9' });
  t.regex(human.stderr, /^pier: cannot reach the admin API at http:\/\/127\.0\.0\.1:9 .*\n$/);
});

test('admin calls without or with a wrong admin token are 401 and change nothing', async (t) => {
  for (const auth of [null, 'wrong-token-wrong-token', `${token}x`]) {
    const res = await admin('/admin/v1/users', { method: 'POST', body: JSON.stringify({ name: 'mallory' }), headers: { 'content-type': 'application/json' } }, auth);
    t.is(res.status, 401);
    t.deepEqual(await res.json(), { code: 401, message: 'admin token missing or wrong' });
  }
  const r = await cliJson('user list', [], { ...env, PIER_ADMIN_TOKEN: 'wrong-token-wrong-token' });
  t.is(r.code, 4, 'auth');
  t.is(JSON.parse(r.stderr).error.status, 401);
  const human = await cli(['user', 'list'], { ...env, PIER_ADMIN_TOKEN: 'wrong-token-wrong-token' });
  t.is(human.stderr, 'pier: admin token missing or wrong (401; the admin token came from PIER_ADMIN_TOKEN)\n');
  const users = await (await admin('/admin/v1/users')).json();
  t.false(users.data.some((u: { name: string }) => u.name === 'mallory'));
});

test('malformed bodies: 400 naming the problem; oversized: 413', async (t) => {
  const post = (body: string) => admin('/admin/v1/users', { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  const cases: Array<[string, string]> = [
    ['{"name":', 'body: is not valid JSON'],
    ['[1,2]', 'body: must be a JSON object'],
    ['', 'body: must be a JSON object'],
    ['{}', 'name: is required'],
    ['{"name":42}', 'name: must be a string'],
  ];
  for (const [body, message] of cases) {
    const res = await post(body);
    t.is(res.status, 400, body);
    t.deepEqual((await res.json()).message, message);
  }
  const big = await post(JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }));
  t.is(big.status, 413);
  t.is((await big.json()).code, 413);
});

test('every listener answers /healthz and /readyz; unknown routes 404; wrong methods 405', async (t) => {
  for (const [name, port] of Object.entries(pier.ports!)) {
    for (const probe of ['/healthz', '/readyz']) {
      const res = await fetch(`http://127.0.0.1:${port}${probe}`);
      t.is(res.status, 200, `${name}${probe}`);
      t.is((await res.json()).code, 0);
    }
    const missing = await fetch(`http://127.0.0.1:${port}/no/such/route`);
    t.is(missing.status, 404, name);
    t.deepEqual(await missing.json(), { code: 404, message: 'no such route' });
  }
  const wrong = await admin('/admin/v1/users', { method: 'PUT' });
  t.is(wrong.status, 405);
  t.is(wrong.headers.get('allow'), 'GET, POST');
  t.is((await wrong.json()).code, 405);
});

test('/metrics serves Prometheus text with the edge and registry series', async (t) => {
  await admin('/admin/v1/users');
  const res = await fetch(`${pier.adminUrl}/metrics`);
  t.is(res.status, 200);
  const text = await res.text();
  t.regex(text, /^# HELP pier_http_requests_total/m);
  t.regex(text, /pier_http_requests_total\{[^}]*route="GET \/admin\/v1\/users"[^}]*\} \d+/);
  t.regex(text, /pier_actor_requests_total\{[^}]*endpoint="pier\.registry\.user\.list"[^}]*\} \d+/);
});

test('status reports roles, bus and this process', async (t) => {
  t.is((await cliJson('user add', ['stats-user'], env)).code, 0);
  const r = await cliJson('status', [], env);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(r.json.roles, [...ROLES].sort());
  t.deepEqual(r.json.bus, { kind: 'memory', connected: true });
  t.is(r.json.replicas.length, 1);
  t.is(r.json.connections, 0);
  t.is(r.json.uploads, 0);
  // Each actor endpoint's figures (lib/runtime/actor.ts): the user added above was served.
  const endpoints = r.json.replicas[0].endpoints as Record<string, { subject: string; requests: number; errors: number }>;
  t.is(endpoints['registry.userAdd'].subject, 'pier.registry.user.add');
  t.true(endpoints['registry.userAdd'].requests >= 1);
  t.deepEqual(Object.keys(endpoints).filter((k) => k.startsWith('vault.')).sort(), ['vault.audit', 'vault.authorize', 'vault.empty', 'vault.export', 'vault.import', 'vault.op', 'vault.operator', 'vault.rekey', 'vault.rotate', 'vault.versions', 'vault.written']);
});

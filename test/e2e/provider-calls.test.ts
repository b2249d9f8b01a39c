import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { Agent, request } from 'undici';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, callProvider, proof, requestAccess, type AppEnv } from '../helpers/app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { until } from '../helpers/wait.js';

let pier: PierProcess;
let upstream: ProviderServer;
let dir: string;
let env: Record<string, string>;
const apps: Record<string, AppEnv> = {};

const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };
const OLD = { group: 'api.old', dataType: 'legacy_old', version: 'v1' };
const DOWN = { group: 'api.down', dataType: 'legacy_down', version: 'v2' };
const SSRF = { group: 'api.ssrf', dataType: 'legacy_ssrf', version: 'v2' };

function manifest(name: string, grants = ''): string {
  return `metadata: { name: ${name}, version: 1.0.0 }\n${grants ? `permission:\n  sysData:\n${grants}` : ''}`;
}
const grant = (t: { group: string; dataType: string; version: string }, app: string, ops: string[]) =>
  `    - { appName: ${app}, port: 80, version: ${t.version}, dataType: ${t.dataType}, group: ${t.group}, ops: [${ops.join(', ')}] }\n`;

async function install(name: string, text: string, providers: string[] = []): Promise<AppEnv> {
  const m = join(dir, `${name}.yaml`);
  writeFileSync(m, text);
  const args = ['app', 'install', '--user', 'alice', '--manifest', m, '--json'];
  providers.forEach((p, i) => {
    const f = join(dir, `${name}-provider-${i}.yaml`);
    writeFileSync(f, p);
    args.push('--provider', f);
  });
  const r = await cli(args, env);
  if (r.code !== 0) throw new Error(r.stderr);
  return r.json.env;
}

async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

test.before(async () => {
  dir = tempDir();
  upstream = await ProviderServer.start();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_PROVIDER_TIMEOUT_MS: '1500', PIER_TOKEN_FAILURES_PER_KEY: '5' }));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  await cli(['user', 'add', 'alice'], env);
  await install('notes', manifest('notes'), [providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo', bytes: '/bytes', big: '/big', slow: '/slow', cut: '/cut', cutBig: '/cut-big', stall: '/stall' } })]);
  await install('old', manifest('old'), [providerDoc('alice', 'provider-old-alice', upstream.port, { ...OLD, version: 'v1', ops: { getThing: '/v1/thing', bad: '/v1/bad', fail: '/v1/fail' } })]);
  await install('down', manifest('down'), [providerDoc('alice', 'provider-down-alice', await closedPort(), { ...DOWN, version: 'v2', ops: { ping: '/ping' } })]);
  apps.chat = await install('chat', manifest('chat', grant(NOTES, 'notes', ['echo', 'bytes', 'big', 'slow', 'cut', 'cutBig', 'stall', 'ghost']) + grant(OLD, 'old', ['getThing', 'bad', 'fail']) + grant(DOWN, 'down', ['ping'])));
  apps.temp = await install('temp', manifest('temp', grant(NOTES, 'notes', ['echo'])));
  apps.locked = await install('locked', manifest('locked', grant(NOTES, 'notes', ['echo']) + grant(OLD, 'old', ['getThing'])));
  apps.victim = await install('victim', manifest('victim', grant(NOTES, 'notes', ['echo'])));
  // Providers pointing at Pier itself and at the cloud metadata address: installed, never dialled.
  await install('ssrf', manifest('ssrf'), [
    providerDoc('alice', 'provider-ssrf-alice', pier.ports!.admin, { ...SSRF, version: 'v2', ops: { metrics: '/metrics' } }),
  ]);
  await install('meta', manifest('meta'), [
    providerDoc('alice', 'provider-meta-alice', 80, { ...SSRF, dataType: 'legacy_meta', version: 'v2', ops: { creds: '/latest/meta-data/' } }).replace('127.0.0.1:80', '169.254.169.254:80'),
  ]);
  await install('named', manifest('named'), [
    providerDoc('alice', 'provider-named-alice', pier.ports!.system, { ...SSRF, dataType: 'legacy_named', version: 'v2', ops: { access: '/permission/v1alpha1/access' } }).replace('127.0.0.1:', 'localhost:'),
  ]);
  apps.prober = await install('prober', manifest('prober', grant(SSRF, 'ssrf', ['metrics']) + grant({ ...SSRF, dataType: 'legacy_meta' }, 'meta', ['creds']) + grant({ ...SSRF, dataType: 'legacy_named' }, 'named', ['access'])));
});

test.after.always(async () => {
  await pier?.stop();
  await upstream?.stop();
  cleanup(dir);
});

const now = () => Math.floor(Date.now() / 1000);
const notesToken = (ops: string[], app = apps.chat) => accessToken(app, { ...NOTES, ops });

test('the whole flow as an app does it: env, bcryptjs cost 10, access token, provider call', async (t) => {
  const ts = now();
  const r = await requestAccess(apps.chat.OS_SYSTEM_SERVER, { app_key: apps.chat.OS_APP_KEY, timestamp: ts, token: await proof(apps.chat, ts), perm: { ...NOTES, ops: ['echo'] } });
  t.is(r.status, 200);
  t.is(r.json.code, 0);
  t.is(r.json.message, 'success');
  t.is(typeof r.json.data.access_token, 'string');
  const expires = Date.parse(r.json.data.expired_at);
  t.true(expires - Date.now() > 4 * 60_000 && expires - Date.now() <= 5 * 60_000, 'expired_at is 5 minutes ahead');
  t.regex(r.json.data.expired_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

  const before = upstream.seen.length;
  const res = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo?id=7&x=a%20b', r.json.data.access_token, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.test+json', 'x-custom': 'kept', cookie: 'auth_token=secret', 'x-authorization': 'user-secret' },
    body: '{"hello":"provider"}',
  });
  t.is(res.status, 201);
  t.is(res.headers.get('x-provider'), 'notes');
  t.is(res.headers.get('cache-control'), 'no-store');
  t.deepEqual(await res.json(), { method: 'PUT', url: '/echo?id=7&x=a%20b', contentType: 'application/vnd.test+json', body: '{"hello":"provider"}' });
  const seen = upstream.seen.slice(before).find((s) => s.url.startsWith('/echo?id=7'))!;
  t.is(seen.headers['x-pier-caller'], 'chat');
  t.is(seen.headers['x-bfl-user'], 'alice');
  t.is(seen.headers['x-custom'], 'kept');
  t.is(seen.headers['x-access-token'], undefined);
  t.is(seen.headers['x-authorization'], undefined);
  t.is(seen.headers.cookie, undefined);
});

test('hostile: a caller cannot pass its app secret on, nor speak for Pier (caller, user, forwarded address)', async (t) => {
  const token = await notesToken(['echo']);
  const before = upstream.seen.length;
  const res = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo?spoof=1', token, {
    headers: {
      'x-app-key': apps.chat.OS_APP_KEY,
      'x-app-secret': apps.chat.OS_APP_SECRET,
      'x-pier-caller': 'admin',
      'x-bfl-user': 'root',
      'x-forwarded-for': '10.0.0.1',
      'x-forwarded-host': 'evil.example',
      forwarded: 'for=10.0.0.1',
      'x-real-ip': '10.0.0.1',
    },
  });
  t.is(res.status, 201);
  const seen = upstream.seen.slice(before).find((s) => s.url.startsWith('/echo?spoof=1'))!;
  t.is(seen.headers['x-app-key'], undefined);
  t.is(seen.headers['x-app-secret'], undefined);
  t.is(seen.headers['x-pier-caller'], 'chat');
  t.is(seen.headers['x-bfl-user'], 'alice');
  t.is(seen.headers['x-forwarded-for'], '127.0.0.1', "Pier's own view of the caller's address");
  t.is(seen.headers['x-forwarded-host'], undefined);
  t.is(seen.headers.forwarded, undefined);
  t.is(seen.headers['x-real-ip'], undefined);
  t.false(JSON.stringify(seen.headers).includes(apps.chat.OS_APP_SECRET));
});

test('an identical request inside the window is answered again (from the verified-proof cache)', async (t) => {
  const ts = now();
  const body = { app_key: apps.chat.OS_APP_KEY, timestamp: ts, token: await proof(apps.chat, ts), perm: { ...NOTES, ops: ['echo'] } };
  const a = await requestAccess(apps.chat.OS_SYSTEM_SERVER, body);
  const b = await requestAccess(apps.chat.OS_SYSTEM_SERVER, body);
  t.is(a.status, 200);
  t.is(b.status, 200);
  const metrics = await (await fetch(`${pier.adminUrl}/metrics`)).text();
  t.regex(metrics, /pier_tokens_issued_total\{[^}]*\} \d+/);
});

test('hostile: a captured proof does not buy other ops; the same proof with another perm is 401 "proof already used"', async (t) => {
  const ts = now();
  const token = await proof(apps.chat, ts);
  const body = { app_key: apps.chat.OS_APP_KEY, timestamp: ts, token, perm: { ...NOTES, ops: ['echo'] } };
  t.is((await requestAccess(apps.chat.OS_SYSTEM_SERVER, body)).status, 200);
  const wider = await requestAccess(apps.chat.OS_SYSTEM_SERVER, { ...body, perm: { ...NOTES, ops: ['echo', 'big'] } });
  t.deepEqual([wider.status, wider.json], [401, { code: 401, message: 'proof already used' }]);
  const other = await requestAccess(apps.chat.OS_SYSTEM_SERVER, { ...body, perm: { ...OLD, ops: ['getThing'] } });
  t.is(other.status, 401);
  // The same perm with its ops in another order (or repeated) is the same request: answered again.
  t.is((await requestAccess(apps.chat.OS_SYSTEM_SERVER, { ...body, perm: { ...NOTES, ops: ['echo', 'echo'] } })).status, 200);
});

test('v2: 5 MiB each way passes byte for byte', async (t) => {
  const token = await notesToken(['bytes']);
  const body = randomBytes(5 * 1024 * 1024);
  const res = await callProvider(apps.chat.OS_SYSTEM_SERVER, `legacy_notes/api.notes/v2/bytes?size=${5 * 1024 * 1024}`, token, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
  t.is(res.status, 200);
  t.is(res.headers.get('x-body-sha256'), createHash('sha256').update(body).digest('hex'));
  const answer = Buffer.from(await res.arrayBuffer());
  t.is(answer.length, 5 * 1024 * 1024);
  t.is(createHash('sha256').update(answer).digest('hex'), res.headers.get('x-answer-sha256') ?? 'missing');
});

test('v1: the envelope goes out and the answer comes back wrapped, exactly', async (t) => {
  const token = await accessToken(apps.chat, { ...OLD, ops: ['getThing', 'bad', 'fail'] });
  const before = upstream.seen.length;
  const res = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_old/api.old/v1/getThing', token, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"q":[1,2]}' });
  t.is(res.status, 200);
  t.deepEqual(await res.json(), { code: 0, message: 'success', data: { thing: 42, got: { op: 'getThing', datatype: 'legacy_old', version: 'v1', group: 'api.old', appkey: apps.chat.OS_APP_KEY, data: { q: [1, 2] } } } });
  const seen = upstream.seen.slice(before).find((s) => s.url === '/v1/thing')!;
  t.is(seen.method, 'POST');
  t.deepEqual(JSON.parse(seen.body.toString()), { op: 'getThing', datatype: 'legacy_old', version: 'v1', group: 'api.old', appkey: apps.chat.OS_APP_KEY, data: { q: [1, 2] } });

  const bad = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_old/api.old/v1/bad', token, { method: 'POST', body: '{}' });
  t.is(bad.status, 502);
  t.deepEqual(await bad.json(), { code: 502, message: 'provider "provider-old-alice" answered with a body that is not JSON' });
  const fail = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_old/api.old/v1/fail', token, { method: 'POST', body: '{}' });
  t.is(fail.status, 502);
  const notJson = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_old/api.old/v1/getThing', token, { method: 'POST', body: 'nope' });
  t.is(notJson.status, 400);
});

test('refusals at the access endpoint: status and message', async (t) => {
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const ts = now();
  const good = await proof(apps.chat, ts);
  const ask = (over: Record<string, unknown>) => requestAccess(sys, { app_key: apps.chat.OS_APP_KEY, timestamp: ts, token: good, perm: { ...NOTES, ops: ['echo'] }, ...over });
  const cases: Array<[string, Promise<{ status: number; json: any }>, number, string | RegExp]> = [
    ['stale timestamp', (async () => ask({ timestamp: ts - 60, token: await proof(apps.chat, ts - 60) }))(), 401, 'timestamp outside the accepted window'],
    ['future timestamp', (async () => ask({ timestamp: ts + 60, token: await proof(apps.chat, ts + 60) }))(), 401, 'timestamp outside the accepted window'],
    ['unknown key', ask({ app_key: 'ak_doesnotexist' }), 401, 'unknown app key'],
    ['wrong secret', (async () => ask({ token: await proof({ OS_APP_KEY: apps.chat.OS_APP_KEY, OS_APP_SECRET: 'wrong-secret-wrong-secret' }, ts) }))(), 401, 'token does not match the app key, timestamp and secret'],
    ['cost 31', ask({ token: `$2b$31$${'a'.repeat(53)}` }), 400, 'token: bcrypt cost must be 4 to 12, got 31'],
    ['not bcrypt', ask({ token: 'plain-text' }), 400, /^token: must be a bcrypt hash/],
    // A proof is single-use across perms: each perm below gets a proof of its own.
    ['op not granted', (async () => ask({ perm: { ...NOTES, ops: ['echo', 'deleteAll'] }, token: await proof(apps.chat, ts) }))(), 403, 'ops not granted to app "chat" for legacy_notes/api.notes/v2: deleteAll'],
    ['perm for another group', (async () => ask({ perm: { ...NOTES, group: 'api.other', ops: ['echo'] }, token: await proof(apps.chat, ts) }))(), 403, /^ops not granted to app "chat" for legacy_notes\/api\.other\/v2: echo$/],
    ['missing perm', ask({ perm: undefined }), 400, 'perm: is required'],
    ['timestamp not a number', ask({ timestamp: 'soon' }), 400, 'timestamp: must be a number'],
  ];
  for (const [what, pending, status, message] of cases) {
    const r = await pending;
    t.is(r.status, status, what);
    t.is(r.json.code, status, what);
    if (typeof message === 'string') t.is(r.json.message, message, what);
    else t.regex(r.json.message, message, what);
  }
});

test('refusals at the provider call: status and message', async (t) => {
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const echo = await notesToken(['echo', 'ghost']);
  const cases: Array<[string, Promise<Response>, number, string]> = [
    ['no token', callProvider(sys, 'legacy_notes/api.notes/v2/echo', null), 401, 'X-Access-Token header is required'],
    ['garbage token', callProvider(sys, 'legacy_notes/api.notes/v2/echo', 'garbage'), 401, 'access token is invalid'],
    ['tampered token', callProvider(sys, 'legacy_notes/api.notes/v2/echo', `${echo.slice(0, -3)}abc`), 401, 'access token is invalid'],
    ['op not in the token', callProvider(sys, 'legacy_notes/api.notes/v2/bytes', echo), 403, 'op "bytes" of legacy_notes/api.notes/v2 is not granted by this access token'],
    ['token for another target', callProvider(sys, 'legacy_old/api.old/v1/echo', echo), 403, 'op "echo" of legacy_old/api.old/v1 is not granted by this access token'],
    ['op not in the provider opApis', callProvider(sys, 'legacy_notes/api.notes/v2/ghost', echo), 404, 'no active provider serves legacy_notes/api.notes/v2 with op "ghost"'],
  ];
  for (const [what, pending, status, message] of cases) {
    const res = await pending;
    t.is(res.status, status, what);
    t.deepEqual(await res.json(), { code: status, message }, what);
  }
});

test.serial('a suspended provider is not called (404) until resumed', async (t) => {
  const token = await notesToken(['echo']);
  const suspend = await cli(['provider', 'suspend', 'provider-notes-alice', '--json'], env);
  t.is(suspend.json.state, 'suspended');
  const res = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token);
  t.is(res.status, 404);
  await cli(['provider', 'resume', 'provider-notes-alice', '--json'], env);
  const resumed = await until('the resume to reach the provider actor', async () => {
    const s = (await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token)).status;
    return s === 404 ? undefined : s;
  });
  t.is(resumed, 201);
});

test.serial('a token dies with its app: uninstall makes it 401 at once', async (t) => {
  const token = await notesToken(['echo'], apps.temp);
  t.is((await callProvider(apps.temp.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token)).status, 201);
  await cli(['app', 'uninstall', '--user', 'alice', 'temp'], env);
  const status = await until('the uninstall to reach the provider actor', async () => {
    const s = (await callProvider(apps.temp.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token)).status;
    return s === 201 ? undefined : s;
  });
  t.is(status, 401);
  const res = await callProvider(apps.temp.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token);
  t.is((await res.json()).message, 'access token is no longer valid: its app was uninstalled or reinstalled');
});

test("hostile: a provider endpoint at Pier's own ports (by address or by name) or at the metadata address is refused with 502, never dialled", async (t) => {
  const call = async (target: typeof SSRF, op: string) => {
    const token = await accessToken(apps.prober, { ...target, ops: [op] });
    const res = await callProvider(apps.prober.OS_SYSTEM_SERVER, `${target.dataType}/${target.group}/${target.version}/${op}`, token);
    return { status: res.status, text: await res.text() };
  };
  const admin = await call(SSRF, 'metrics');
  t.deepEqual(admin, { status: 502, text: '{"code":502,"message":"provider \\"provider-ssrf-alice\\" is not called: its endpoint leads to one of Pier\'s own ports"}' });
  t.false(admin.text.includes('pier_'), 'no metrics leaked');
  const meta = await call({ ...SSRF, dataType: 'legacy_meta' }, 'creds');
  t.is(meta.status, 502);
  t.regex(meta.text, /its endpoint leads to a link-local or cloud-metadata address/);
  const named = await call({ ...SSRF, dataType: 'legacy_named' }, 'access');
  t.is(named.status, 502, 'localhost resolves to this host: refused on the address dialled');
  t.false(named.text.includes('127.0.0.1'), 'no internal address in the answer');
});

test('unreachable provider 502; slow provider 504; other providers unaffected meanwhile', async (t) => {
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const down = await accessToken(apps.chat, { ...DOWN, ops: ['ping'] });
  const r1 = await callProvider(sys, 'legacy_down/api.down/v2/ping', down);
  t.is(r1.status, 502);
  t.deepEqual(await r1.json(), { code: 502, message: 'provider "provider-down-alice" is unreachable: its endpoint refused the connection (nothing listens there)' });

  const token = await notesToken(['slow', 'echo']);
  const slow = callProvider(sys, 'legacy_notes/api.notes/v2/slow', token);
  const meanwhile = await callProvider(sys, 'legacy_notes/api.notes/v2/echo', token);
  t.is(meanwhile.status, 201);
  const r2 = await slow;
  t.is(r2.status, 504);
  t.deepEqual(await r2.json(), { code: 504, message: 'provider "provider-notes-alice" did not answer within 1500 ms' });
});

test('hostile: a provider that dies or falls silent in the middle of an answer: 502 or 504 (a large one cut), never a hang, and Pier serves on', async (t) => {
  const sys = apps.chat.OS_SYSTEM_SERVER;
  const token = await notesToken(['cut', 'cutBig', 'stall', 'echo']);
  const cut = await callProvider(sys, 'legacy_notes/api.notes/v2/cut', token);
  t.is(cut.status, 502);
  t.regex(((await cut.json()) as { message: string }).message, /provider "provider-notes-alice"/);
  const stalled = await callProvider(sys, 'legacy_notes/api.notes/v2/stall', token);
  t.is(stalled.status, 504);
  t.deepEqual(await stalled.json(), { code: 504, message: 'provider "provider-notes-alice" did not answer within 1500 ms' });
  // Past the first piece, the status is already sent: the cut reaches the caller as a cut answer.
  const big = await callProvider(sys, 'legacy_notes/api.notes/v2/cutBig', token);
  const got = await big.arrayBuffer().then((b) => b.byteLength, () => -1);
  t.true(got < 4 * 1024 * 1024, `the caller did not get a whole answer (${got} bytes)`);
  t.is((await callProvider(sys, 'legacy_notes/api.notes/v2/echo', token)).status, 201, 'the next call is served');
  t.is(pier.proc.exitCode, null);
});

test('bodies over 8 MiB: 413 either way', async (t) => {
  const token = await notesToken(['bytes', 'big']);
  const up = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/bytes?size=1', token, { method: 'POST', body: Buffer.alloc(9 * 1024 * 1024) });
  t.is(up.status, 413);
  t.is((await up.json()).code, 413);
  const down = await callProvider(apps.chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/big', token);
  t.is(down.status, 413);
  t.deepEqual(await down.json(), { code: 413, message: `answer of provider "provider-notes-alice" is larger than ${8 * 1024 * 1024} bytes` });
});

/** An access request sent from another loopback address: another client, as Pier sees it. */
async function requestAccessFrom(address: string, body: unknown): Promise<{ status: number; json: any }> {
  const dispatcher = new Agent({ localAddress: address });
  try {
    const res = await request(`http://${apps.chat.OS_SYSTEM_SERVER}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), dispatcher });
    return { status: res.statusCode, json: await res.body.json() };
  } finally {
    await dispatcher.close();
  }
}

test.serial('S-4: a v1 provider learns its caller\'s key and sends ten bad proofs under it from the same address: the caller\'s right proof is answered, never 429', async (t) => {
  // The caller calls the v1 provider; the provider reads the caller's app key in the envelope.
  const before = upstream.seen.length;
  const token = await accessToken(apps.locked, { ...OLD, ops: ['getThing'] });
  t.is((await callProvider(apps.locked.OS_SYSTEM_SERVER, 'legacy_old/api.old/v1/getThing', token, { method: 'POST', body: '{}' })).status, 200);
  const learnt = JSON.parse(upstream.seen.slice(before).find((s) => s.url === '/v1/thing')!.body.toString()).appkey as string;
  t.is(learnt, apps.locked.OS_APP_KEY);
  // On one host every app reaches Pier from 127.0.0.1: the provider's bad proofs come from the caller's own address.
  const wrong = { OS_APP_KEY: learnt, OS_APP_SECRET: 'not-the-secret-not-the-secret' };
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const ts = now();
    statuses.push((await requestAccess(apps.locked.OS_SYSTEM_SERVER, { app_key: wrong.OS_APP_KEY, timestamp: ts, token: await proof(wrong, ts, 4), perm: { ...NOTES, ops: ['echo'] } })).status);
  }
  t.deepEqual(statuses, Array(10).fill(401), 'past the limit (5) bad proofs are slowed, still checked, and refused as bad');
  const ts = now();
  const right = await requestAccess(apps.locked.OS_SYSTEM_SERVER, { app_key: apps.locked.OS_APP_KEY, timestamp: ts, token: await proof(apps.locked, ts), perm: { ...NOTES, ops: ['echo'] } });
  t.is(right.status, 200, JSON.stringify(right.json));
});

test.serial('hostile: 12 concurrent bad proofs from one address: none refused unchecked or locks anyone out; the app is answered from that address and elsewhere', async (t) => {
  const victim = apps.victim;
  const wrong = { OS_APP_KEY: victim.OS_APP_KEY, OS_APP_SECRET: 'not-the-secret-not-the-secret' };
  const ts = now();
  const attempts = Promise.all(
    Array.from({ length: 12 }, async () => requestAccessFrom('127.0.0.2', { app_key: wrong.OS_APP_KEY, timestamp: ts, token: await proof(wrong, ts, 4), perm: { ...NOTES, ops: ['echo'] } })),
  );
  // The app itself, from its own address and from the attacker's, while the flood is being checked.
  const elsewhere = await requestAccessFrom('127.0.0.3', { app_key: victim.OS_APP_KEY, timestamp: now(), token: await proof(victim, now()), perm: { ...NOTES, ops: ['echo'] } });
  t.is(elsewhere.status, 200, JSON.stringify(elsewhere.json));
  const same = await requestAccessFrom('127.0.0.2', { app_key: victim.OS_APP_KEY, timestamp: now(), token: await proof(victim, now()), perm: { ...NOTES, ops: ['echo'] } });
  t.is(same.status, 200, JSON.stringify(same.json));
  t.deepEqual((await attempts).map((a) => a.status), Array(12).fill(401), 'each bad proof checked (the ones past the limit one at a time, spaced) and refused as bad');
});

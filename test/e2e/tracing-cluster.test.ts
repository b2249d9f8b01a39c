import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, callProvider, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { NatsServer } from '../helpers/nats-server.js';
import { OtlpReceiver, parentOf, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { until } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';

// Tracing (issue #44) in the NATS shape: every role its own process, each exporting to an OTLP
// receiver in the test. One trace from a browser frame to the app's callback, from an app's provider
// call to the provider, from an app's vault read to the vault, every hop in order with the right
// parents; what a browser's sampled flag can force, and that an anonymous caller's forces nothing; no
// secret in any span.
let nats: NatsServer;
let otlp: OtlpReceiver;
let app: WsApp;
let upstream: ProviderServer;
let dir: string;
let edge: PierProcess;
let chat: AppEnv;
let userToken: string;
const procs: PierProcess[] = [];
const SECRET_VALUE = `motto-${randomBytes(8).toString('hex')}`;
const COOKIE = `session=${randomBytes(12).toString('hex')}`;
const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250', PIER_PEER_DEAD_MS: '2000' };
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };

async function start(name: string, roles: string, extra: Record<string, string> = {}): Promise<PierProcess> {
  const p = await PierProcess.start(
    pierEnv(join(dir, name), { ...shared, NATS_URL: nats.url, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_SERVICE_NAME: `pier-${name}`, OTEL_TRACES_SAMPLER: 'parentbased_always_on', PIER_TRACE_HINTS_PER_S: '2', ...extra }),
    ['--roles', roles],
  );
  procs.push(p);
  return p;
}

/** Each span's parent is the span before it in `chain`, and starts no earlier. */
function assertChain(t: { is: (a: unknown, b: unknown, m?: string) => void; true: (v: boolean, m?: string) => void }, chain: ReceivedSpan[]): void {
  for (let i = 1; i < chain.length; i++) {
    t.is(chain[i].parentSpanId, chain[i - 1].spanId, `${chain[i].name} (${chain[i].service}) is a child of ${chain[i - 1].name} (${chain[i - 1].service})`);
    t.true(chain[i].start >= chain[i - 1].start, `${chain[i].name} starts after ${chain[i - 1].name}`);
  }
}

const one = (spans: ReceivedSpan[], name: string | RegExp, service?: string) => {
  const found = spans.filter((s) => (typeof name === 'string' ? s.name === name : name.test(s.name)) && (service === undefined || s.service === service));
  if (found.length !== 1) throw new Error(`expected one span ${String(name)}${service ? ` of ${service}` : ''}, found ${found.length}: ${spans.map((s) => `${s.service}:${s.name}`).join(', ')}`);
  return found[0];
};

test.before(async () => {
  dir = tempDir();
  nats = await NatsServer.start();
  otlp = await OtlpReceiver.start();
  app = await WsApp.start();
  upstream = await ProviderServer.start();
  await start('registry', 'registry');
  await Promise.all([start('token', 'token'), start('vault', 'vault'), start('provider', 'provider'), start('callback', 'callback')]);
  edge = await start('edge', 'edge,admin');
  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(
    join(dir, 'chat.yaml'),
    [
      'metadata: { name: chat }',
      'options:',
      `  websocket: { url: /ws/message, port: ${app.port} }`,
      'permission:',
      '  sysData:',
      '    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }',
      '    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat] }',
      '',
    ].join('\n'),
  );
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'provider.yaml')], env);
  chat = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
});

test.after.always(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await Promise.all([otlp?.stop(), app?.stop(), upstream?.stop(), nats?.stop()]);
  cleanup(dir);
});

test.serial('a browser frame: the edge, the bus and the callback actor, then the app gets a traceparent whose trace holds every hop in order', async (t) => {
  const client = await until('the edge to take alice\'s connection', () => connect(edge.ports!.public, 'chat.alice.localhost', { 'x-authorization': userToken, cookie: COOKIE }).catch(() => undefined), 20_000);
  client.ws.send(JSON.stringify({ event: 'traced', data: { n: 1 } }));
  const callback = await until('the message\'s callback at the app', () => app.accepted.find((k) => k.body.action === 'message'));
  const tp = parentOf(callback.headers.traceparent);
  t.true(tp.sampled);
  const spans = await otlp.waitFor(tp.traceId, ['ws message', /^send pier\.cb\.deliver\./, /^pier\.cb\.deliver\./, 'POST callback']);
  const chain = [one(spans, 'ws message', 'pier-edge'), one(spans, /^send pier\.cb\.deliver\./, 'pier-edge'), one(spans, /^pier\.cb\.deliver\./, 'pier-callback'), one(spans, 'POST callback', 'pier-callback')];
  assertChain(t, chain);
  t.is(chain[0].parentSpanId, '', 'each frame starts a trace of its own');
  t.is(tp.spanId, chain[3].spanId, 'the app\'s traceparent names the callback request\'s span');
  t.is(chain[3].attributes['http.response.status_code'], 200);
  // Linked to the connection's upgrade, which is a span of its own, already ended.
  t.is(chain[0].links.length, 1);
  await until('the upgrade span', () => otlp.spans.some((s) => s.name === 'ws upgrade' && s.spanId === chain[0].links[0].spanId));
  client.ws.close();
});

test.serial('an app\'s provider call keeps the app\'s trace: the edge, the bus, the provider actor, and the provider gets a child traceparent', async (t) => {
  const token = await until('an access token', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  const traceId = randomBytes(16).toString('hex');
  const appSpan = randomBytes(8).toString('hex');
  const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo?secret=query', token, { method: 'POST', body: '{}', headers: { traceparent: `00-${traceId}-${appSpan}-01` } });
  t.is(res.status, 201);
  const seen = upstream.seen.at(-1)!;
  const tp = parentOf(seen.headers.traceparent);
  t.is(tp.traceId, traceId, 'the provider is called in the app\'s trace');
  const spans = await otlp.waitFor(traceId, [/^POST \/system-server/, 'send pier.provider.call', 'pier.provider.call', 'POST provider']);
  const request = one(spans, /^POST \/system-server/, 'pier-edge');
  const chain = [request, one(spans, 'send pier.provider.call', 'pier-edge'), one(spans, 'pier.provider.call', 'pier-provider'), one(spans, 'POST provider', 'pier-provider')];
  t.is(request.parentSpanId, appSpan, 'the edge\'s span is a child of the app\'s');
  assertChain(t, chain);
  // The check of the token came before: until it passed, the caller was not known to be the app (#52 F6).
  t.false(spans.some((s) => /pier\.provider\.authorize/.test(s.name)), 'the token\'s check is not in the app\'s trace');
  t.is(tp.spanId, chain[3].spanId);
  t.false(spans.some((s) => s.raw.includes('secret=query')), 'no query string in any span');
});

test.serial('an app\'s vault read: the edge, the bus, the vault; a vault write is durable inside its trace', async (t) => {
  const access = await until('a vault access token', () => accessToken(chat, vaultPerm('chat', ['RetrieveSecret', 'CreateSecret'])));
  const traceId = randomBytes(16).toString('hex');
  const created = await vaultCall(chat.OS_SYSTEM_SERVER, 'CreateSecret', 'chat', { user: userToken, access }, { name: 'motto', env: 'prod', value: SECRET_VALUE });
  t.is(created.status, 200, created.text);
  const writeTrace = randomBytes(16).toString('hex');
  // A write in a trace of its own: its LMDB commit is a span of it.
  const again = await fetch(`http://${chat.OS_SYSTEM_SERVER}/system-server/v1alpha1/secret/secret.vault/v1/CreateSecret?workspace=chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-authorization': userToken, 'x-access-token': access, traceparent: `00-${writeTrace}-${randomBytes(8).toString('hex')}-01` },
    body: JSON.stringify({ name: 'motto2', env: 'prod', value: SECRET_VALUE }),
  });
  t.is(again.status, 200);
  const read = await fetch(`http://${chat.OS_SYSTEM_SERVER}/system-server/v1alpha1/secret/secret.vault/v1/RetrieveSecret?workspace=chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-authorization': userToken, 'x-access-token': access, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
    body: JSON.stringify({ name: 'motto', env: 'prod' }),
  });
  t.is(read.status, 200);
  const spans = await otlp.waitFor(traceId, [/^POST \/system-server/, /^send pier\.vault\.op/, /^pier\.vault\.op/]);
  assertChain(t, [one(spans, /^POST \/system-server/, 'pier-edge'), one(spans, /^send pier\.vault\.op/, 'pier-edge'), one(spans, /^pier\.vault\.op/, 'pier-vault')]);
  const writes = await otlp.waitFor(writeTrace, [/^pier\.vault\.op/, 'lmdb commit']).catch((err: Error) => {
    throw new Error(`${err.message}; the trace holds ${otlp.trace(writeTrace).map((s) => `${s.service}:${s.name}`).join(', ')}`);
  });
  t.is(one(writes, 'lmdb commit', 'pier-vault').parentSpanId, one(writes, /^pier\.vault\.op/, 'pier-vault').spanId);
});

test.serial('an operator\'s install: the admin request, the bus and the registry\'s durable commit in one trace', async (t) => {
  const found = await until('a registry commit with its parent and the admin request exported', () => {
    for (const commit of otlp.spans.filter((s) => s.service === 'pier-registry' && s.name === 'lmdb commit')) {
      const parent = otlp.spans.find((s) => s.spanId === commit.parentSpanId);
      const first = otlp.trace(commit.traceId)[0];
      if (parent && first && /^POST \/admin\/v1\/apps/.test(first.name)) return { commit, parent, first };
    }
    return null;
  });
  t.regex(found.parent.name, /^pier\.registry\./);
  t.is(found.parent.service, 'pier-registry');
  t.is(found.first.service, 'pier-edge');
  t.is(found.first.parentSpanId, '', 'the CLI sent no traceparent: the admin request starts the trace');
});

test.serial('hostile: a browser\'s sampled flag is a hint under a rate limit; an anonymous caller\'s on the app listeners is not followed; an app\'s is', async (t) => {
  // The root sampler here keeps nothing: only a followed parent makes a span sampled.
  const hinted = await start('edge-hinted', 'edge', { OTEL_TRACES_SAMPLER: 'parentbased_always_off', PIER_TRACE_HINTS_PER_S: '2' });
  const token = await until('an access token', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  const browserTraces: string[] = [];
  for (let i = 0; i < 30; i++) {
    const traceId = randomBytes(16).toString('hex');
    browserTraces.push(traceId);
    // The upload listener (browsers): an unknown upload is refused, and its request is a span.
    await fetch(`http://127.0.0.1:${hinted.ports!.upload}/upload/nope`, { headers: { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } });
  }
  // Anonymous on the system listener (no proof): not even a hint (#52 F6).
  const anonymousTraces: string[] = [];
  for (let i = 0; i < 10; i++) {
    const traceId = randomBytes(16).toString('hex');
    anonymousTraces.push(traceId);
    await fetch(`http://127.0.0.1:${hinted.ports!.system}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` }, body: '{}' });
  }
  // An app's provider calls, its access token checked: followed, every one.
  const appTraces: string[] = [];
  for (let i = 0; i < 10; i++) {
    const traceId = randomBytes(16).toString('hex');
    appTraces.push(traceId);
    const res = await fetch(`http://127.0.0.1:${hinted.ports!.system}/system-server/v1alpha1/legacy_notes/api.notes/v2/echo`, { method: 'POST', headers: { 'x-access-token': token, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` }, body: '{}' });
    t.is(res.status, 201);
  }
  // Exported in the order they ended: once the app's are, the requests before them would have been.
  await until('every app request\'s span exported', () => appTraces.every((id) => otlp.trace(id).length > 0));
  t.deepEqual(anonymousTraces.filter((id) => otlp.spans.some((s) => s.traceId === id || s.links.some((l) => l.traceId === id))), [], 'no anonymous request followed');
  const browserSampled = browserTraces.filter((id) => otlp.trace(id).length > 0).length;
  t.true(browserSampled >= 1, 'a browser\'s hint is followed within the limit');
  t.true(browserSampled <= 10, `30 sampled browser requests in a moment: at most the limit's worth followed, got ${browserSampled}`);
  await hinted.stop('SIGTERM');
});

test.serial('hostile: no secret value, token, cookie, key or app secret in any exported span', async (t) => {
  await until('some spans', () => otlp.spans.length > 20);
  const forbidden = [SECRET_VALUE, userToken, COOKIE.split('=')[1], shared.PIER_MASTER_KEY, shared.PIER_ADMIN_TOKEN, chat.OS_APP_SECRET];
  for (const s of otlp.spans) for (const f of forbidden) t.false(s.raw.includes(f), `span ${s.service}:${s.name} holds a secret`);
  t.true(otlp.spans.some((s) => s.service === 'pier-vault'), 'the vault\'s spans were among those read');
});

test.serial('with the collector down, requests still succeed, spans past the queue bound are dropped and counted, one log line says so', async (t) => {
  const gone = await OtlpReceiver.start();
  const endpoint = gone.endpoint;
  await gone.stop();
  const lonely = await start('edge-lonely', 'edge', { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, PIER_TRACE_QUEUE_SPANS: '64' });
  let answered = 0;
  for (let i = 0; i < 300; i++) {
    const res = await fetch(`http://127.0.0.1:${lonely.ports!.upload}/upload/nope`);
    await res.arrayBuffer();
    if (res.status < 500) answered++;
  }
  t.is(answered, 300, 'every request answered by its route, none failed for the collector');
  // The cluster's /metrics (the admin listener gathers every process's), this process's line.
  const dropped = await until('spans dropped past the bound', async () => {
    const text = await (await fetch(`${edge.adminUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('pier_trace_spans_dropped_total{') && l.includes(`instance="${lonely.instance}"`));
    return line && Number(line.split(' ').at(-1)) > 0 ? Number(line.split(' ').at(-1)) : null;
  }).catch(() => null);
  const warned = await until('the export failure said once', () => lonely.logs.split('\n').filter((l) => l.includes('tracing: spans could not be exported')).length >= 1, 15_000).then(() => true, () => false);
  t.true(warned, lonely.logs.slice(-2000));
  t.is(lonely.logs.split('\n').filter((l) => l.includes('tracing: spans could not be exported')).length, 1, 'said at most once a minute');
  t.truthy(dropped, 'the drop is counted');
  await lonely.stop('SIGTERM');
});

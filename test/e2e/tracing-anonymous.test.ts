import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, callProvider, proof, type AppEnv } from '../helpers/app-client.js';
import { OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { providerDoc, ProviderServer } from '../helpers/provider-server.js';
import { until } from '../helpers/wait.js';

// Issue #52 F6, on one process: on the listeners for apps and the operator, a sampled traceparent is
// followed only once the edge has checked who sent it (an app's access token, its key and secret, the
// operator's token). The sampler keeps no root here (parentbased_traceidratio at 0), so a span is
// exported only when a parent was followed: an anonymous caller's must never be.
let dir: string;
let pier: PierProcess;
let otlp: OtlpReceiver;
let upstream: ProviderServer;
let chat: AppEnv;
const ADMIN_TOKEN = randomBytes(24).toString('hex');
const NOTES = { group: 'api.notes', dataType: 'legacy_notes', version: 'v2' };

test.before(async () => {
  dir = tempDir();
  otlp = await OtlpReceiver.start();
  upstream = await ProviderServer.start();
  pier = await PierProcess.start(
    pierEnv(join(dir, 'data'), { PIER_ADMIN_TOKEN: ADMIN_TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_SERVICE_NAME: 'pier-one', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }),
  );
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  await cli(['user', 'add', 'alice', '--json'], env);
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\n');
  writeFileSync(join(dir, 'provider.yaml'), providerDoc('alice', 'provider-notes-alice', upstream.port, { ...NOTES, version: 'v2', ops: { echo: '/echo' } }));
  writeFileSync(
    join(dir, 'chat.yaml'),
    'metadata: { name: chat }\npermission:\n  sysData:\n    - { appName: notes, port: 80, version: v2, dataType: legacy_notes, group: api.notes, ops: [echo] }\n',
  );
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--provider', join(dir, 'provider.yaml')], env);
  chat = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env)).json.env;
});

test.after.always(async () => {
  await pier?.stop('SIGKILL');
  await Promise.all([otlp?.stop(), upstream?.stop()]);
  cleanup(dir);
});

/** A sampled traceparent in a trace of its own, and its ids. */
function sampledParent(): { traceparent: string; traceId: string; spanId: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/** Exported spans in one of `traceIds`, or linked to one. */
const touching = (traceIds: Set<string>): ReceivedSpan[] => otlp.spans.filter((s) => traceIds.has(s.traceId) || s.links.some((l) => traceIds.has(l.traceId)));

/**
 * An app's provider call with a sampled parent, once its spans are exported: spans end and are
 * exported in order, one batch after another, so whatever ended before it was exported by then.
 */
async function followedProviderCall(): Promise<{ parent: ReturnType<typeof sampledParent>; request: ReceivedSpan }> {
  const token = await until('an access token', () => accessToken(chat, { ...NOTES, ops: ['echo'] }));
  const parent = sampledParent();
  const res = await callProvider(chat.OS_SYSTEM_SERVER, 'legacy_notes/api.notes/v2/echo', token, { method: 'POST', body: '{}', headers: { traceparent: parent.traceparent } });
  if (res.status !== 201) throw new Error(`the provider call answered ${res.status}: ${await res.text()}`);
  const spans = await otlp.waitFor(parent.traceId, [/^POST \/system-server/]);
  return { parent, request: spans.find((s) => /^POST \/system-server/.test(s.name))! };
}

test.serial('hostile: 200 anonymous access requests (and the other listeners\' anonymous calls) with a sampled traceparent export no span', async (t) => {
  const anonymous = new Set<string>();
  const statuses = new Set<number>();
  const send = async (url: string, init: RequestInit & { headers?: Record<string, string> }) => {
    const parent = sampledParent();
    anonymous.add(parent.traceId);
    const res = await fetch(url, { ...init, headers: { ...init.headers, traceparent: parent.traceparent } });
    await res.arrayBuffer();
    statuses.add(res.status);
  };
  const now = Math.floor(Date.now() / 1000);
  // A proof of the right shape for a real app key, made with a guessed secret (cost 4: cheap for Pier to refuse).
  const guessed = { app_key: chat.OS_APP_KEY, timestamp: now, token: await proof({ OS_APP_KEY: chat.OS_APP_KEY, OS_APP_SECRET: 'guessed' }, now, 4), perm: { ...NOTES, ops: ['echo'] } };
  const system = `http://${chat.OS_SYSTEM_SERVER}`;
  // The finding's request, POST /permission/v1alpha1/access, with no proof, a stale one, an unknown
  // app's, or a wrong one (a few: past the failure limit, a pair's checks are spaced out).
  const bodies = ['{}', JSON.stringify({ ...guessed, timestamp: now - 3_600 }), JSON.stringify({ ...guessed, app_key: 'no-such-app-key' }), JSON.stringify(guessed)];
  for (let i = 0; i < 200; i++) {
    await send(`${system}/permission/v1alpha1/access`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodies[i < 20 ? 3 : i % 3]! });
  }
  for (let i = 0; i < 10; i++) {
    await send(`${system}/system-server/v1alpha1/legacy_notes/api.notes/v2/echo`, { method: 'POST', headers: { 'x-access-token': `forged-${i}` }, body: '{}' });
    await send(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': chat.OS_APP_KEY, 'x-app-secret': `guess-${i}` } });
    await send(`${pier.adminUrl}/admin/v1/users`, { headers: { authorization: `Bearer wrong-${i}-${'x'.repeat(24)}` } });
  }
  t.deepEqual([...statuses].filter((s) => s < 400 || s >= 500), [], 'every anonymous request was refused as such');
  t.is(anonymous.size, 230);
  // The marker: an app's followed call after them all; its spans exported means theirs would have been.
  const { parent, request } = await followedProviderCall();
  t.is(request.parentSpanId, parent.spanId);
  const leaked = touching(anonymous);
  t.is(leaked.length, 0, `no span of an anonymous request, in its trace or linked to it; exported: ${leaked.slice(0, 5).map((s) => `${s.name} (${String(s.attributes['pier.parent'] ?? '')})`).join(', ')}`);
  t.false(otlp.spans.some((s) => s.name === 'POST /permission/v1alpha1/access'), 'no access request was sampled at ratio 0');
});

test.serial('an authenticated app\'s and the operator\'s sampled parents are followed; an access request, proof and all, is not', async (t) => {
  // The access request proves who the app is, to the token actor, after its trace was chosen: anonymous.
  const asked = sampledParent();
  const now = Math.floor(Date.now() / 1000);
  const res = await fetch(`http://${chat.OS_SYSTEM_SERVER}/permission/v1alpha1/access`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: asked.traceparent },
    body: JSON.stringify({ app_key: chat.OS_APP_KEY, timestamp: now, token: await proof(chat, now), perm: { ...NOTES, ops: ['echo'] } }),
  });
  t.is(res.status, 200, await res.text());

  // An app by its key and secret (the local API).
  const local = sampledParent();
  const list = await fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': chat.OS_APP_KEY, 'x-app-secret': chat.OS_APP_SECRET, traceparent: local.traceparent } });
  t.is(list.status, 200);
  const listed = (await otlp.waitFor(local.traceId, ['GET /runtime/ws/conn/list'])).find((s) => s.name === 'GET /runtime/ws/conn/list')!;
  t.is(listed.parentSpanId, local.spanId, 'the local API call is a child of the app\'s span');
  t.is(listed.attributes['pier.parent'], 'trusted');

  // The operator by the admin token.
  const operator = sampledParent();
  const users = await fetch(`${pier.adminUrl}/admin/v1/users`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}`, traceparent: operator.traceparent } });
  t.is(users.status, 200);
  const admin = (await otlp.waitFor(operator.traceId, ['GET /admin/v1/users'])).find((s) => s.name === 'GET /admin/v1/users')!;
  t.is(admin.parentSpanId, operator.spanId, 'the admin request is a child of the operator\'s span');

  // An app by its access token (the system listener), whose trace goes on to the provider.
  const { parent, request } = await followedProviderCall();
  t.is(request.parentSpanId, parent.spanId, 'the provider call is a child of the app\'s span');
  t.is(request.attributes['pier.parent'], 'trusted');
  t.is(upstream.seen.at(-1)!.headers.traceparent?.toString().slice(3, 35), parent.traceId, 'the provider is called in the app\'s trace');
  t.deepEqual(touching(new Set([asked.traceId])).map((s) => s.name), [], 'the access request was not followed');
});

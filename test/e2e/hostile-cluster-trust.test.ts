import test from 'ava';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { BUS_ROLES, STATE_ROLES } from '../../bus/permissions.js';
import { HISTORY_STREAM, registryState, tokenState, uploadState, vaultState, type Heartbeat } from '../../bus/subjects.js';
import { cli } from '../helpers/pier.js';
import { trustCluster, type TrustCluster } from '../helpers/trust-cluster.js';
import { sleep, until } from '../helpers/wait.js';
import { connect as wsConnect, type Client } from '../helpers/ws-client.js';

// docs/security.md "The bus" (amended 2026-11-23), attacked with every role's credentials on the
// production shape: a 3-node authenticated JetStream cluster, state on JetStream. JetStream acts
// with its account's authority, so a role's service identity must hold no JetStream right, and a
// role's state login must reach nothing outside its own account.
let c: TrustCluster;
let spy: NatsConnection;
/** Every message the sniffer heard on the service account, by subject. */
const heard: Array<{ subject: string; data: Uint8Array }> = [];

test.before(async () => {
  c = await trustCluster();
  spy = await c.sniffer();
  spy.subscribe('>', { callback: (_e, m) => heard.push({ subject: m.subject, data: m.data }) });
});

test.after.always(async () => {
  await c?.stop();
});

const STREAMS = [registryState.stream, registryState.snapshotStream, tokenState.stream, `KV_${vaultState.keys}`, `KV_${vaultState.secrets}`, vaultState.auditStream, uploadState.stream, uploadState.snapshotStream, HISTORY_STREAM];
const OWN_STREAMS: Record<string, string[]> = {
  registry: [registryState.stream, registryState.snapshotStream],
  token: [tokenState.stream],
  vault: [`KV_${vaultState.keys}`, `KV_${vaultState.secrets}`, vaultState.auditStream],
  upload: [uploadState.stream, uploadState.snapshotStream],
  edge: [HISTORY_STREAM],
};
/** Where a forged delivery would do harm: an actor's endpoint, an edge's, every inbox. */
const TARGETS: Array<[string, string | undefined]> = [
  ['pier.registry.app.install', 'registry'],
  ['pier.registry.user.add', 'registry'],
  ['pier.vault.op', 'vault'],
  ['pier.gw.user.alice.chat', undefined],
  ['_INBOX.pier-admin.forged', undefined],
];

/** The cluster's answer to a JetStream API request: 'refused' (by permissions, or an error answer) or 'accepted'. */
async function verdict(nc: NatsConnection, subject: string, body: unknown = {}): Promise<string> {
  try {
    const m = await nc.request(subject, new TextEncoder().encode(JSON.stringify(body)), { timeout: 1_500 });
    const text = new TextDecoder().decode(m.data);
    return text.includes('"error"') || m.headers?.code === 503 ? 'refused' : `accepted: ${text.slice(0, 120)}`;
  } catch (err) {
    return 'refused';
  }
}

function jetStreamAttacks(streams: string[]): Array<[string, unknown]> {
  return [
    ['$JS.API.INFO', {}],
    ['$JS.API.STREAM.CREATE.EVIL', { name: 'EVIL', subjects: ['_INBOX.>', 'pier.>'], storage: 'memory', num_replicas: 1 }],
    [`$KV.${vaultState.secrets}.evil`, { forged: true }],
    [`$KV.${vaultState.keys}.evil`, { forged: true }],
    ...streams.flatMap((s): Array<[string, unknown]> => [
      [`$JS.API.STREAM.UPDATE.${s}`, { name: s, subjects: ['_INBOX.>'], num_replicas: 3 }],
      [`$JS.API.STREAM.DELETE.${s}`, {}],
      [`$JS.API.STREAM.PURGE.${s}`, {}],
      [`$JS.API.DIRECT.GET.${s}`, { seq: 1 }],
      ...TARGETS.map(([target, group]): [string, unknown] => [`$JS.API.CONSUMER.CREATE.${s}`, { stream_name: s, config: { deliver_subject: target, deliver_group: group, ack_policy: 'none', deliver_policy: 'all' } }]),
    ]),
  ];
}

/** Waits a while and answers what reached the given subjects on the service account since `from`. */
async function reached(from: number, subjects: string[], waitMs = 1_500): Promise<string[]> {
  await sleep(waitMs);
  return heard.slice(from).filter((m) => subjects.some((s) => m.subject === s || m.subject.startsWith(s))).map((m) => m.subject);
}

test.serial('every role\'s service identity: no JetStream API answers it, and no stream, bucket or consumer of Pier is touched', async (t) => {
  for (const role of BUS_ROLES) {
    const nc = await c.client(role);
    const results = await Promise.all(jetStreamAttacks(STREAMS).map(async ([subject, body]) => [subject, await verdict(nc, subject, body)] as const));
    for (const [subject, v] of results) t.is(v, 'refused', `${role}: ${subject}`);
    await nc.close();
  }
  // Pier's state is untouched: each stream is still there with its own subjects (asked with the owner's login).
  for (const role of STATE_ROLES) {
    const owner = await c.client(role, true);
    for (const s of OWN_STREAMS[role]) {
      const info = JSON.parse(new TextDecoder().decode((await owner.request(`$JS.API.STREAM.INFO.${s}`, new Uint8Array(), { timeout: 5_000 })).data));
      t.falsy(info.error, `${s}: ${JSON.stringify(info.error)}`);
      t.false((info.config.subjects as string[]).includes('_INBOX.>'), `${s} captures inboxes`);
    }
  }
});

test.serial('every role\'s state login: confined to its own account — other roles\' streams and buckets refused, its own deliveries reach no service', async (t) => {
  const from = heard.length;
  for (const role of STATE_ROLES) {
    const nc = await c.client(role, true);
    const others = STREAMS.filter((s) => !OWN_STREAMS[role].includes(s));
    const ownBuckets = OWN_STREAMS[role].filter((s) => s.startsWith('KV_')).map((s) => `$KV.${s.slice(3)}.`);
    const attacks = jetStreamAttacks(others).filter(([s]) => s !== '$JS.API.INFO' && !ownBuckets.some((b) => s.startsWith(b)));
    const results = await Promise.all(attacks.map(async ([subject, body]) => [subject, await verdict(nc, subject, body)] as const));
    for (const [subject, v] of results) t.is(v, 'refused', `${role} state: ${subject}`);
    // Its own streams: a push consumer delivering onto Pier's endpoints and inboxes is possible
    // inside its account, and must reach nothing outside it.
    for (const s of OWN_STREAMS[role]) {
      for (const [target, group] of TARGETS) {
        await verdict(nc, `$JS.API.CONSUMER.CREATE.${s}`, { stream_name: s, config: { deliver_subject: target, deliver_group: group, ack_policy: 'none', deliver_policy: 'all' } });
      }
    }
    await nc.close();
  }
  t.deepEqual(await reached(from, TARGETS.map(([s]) => s)), [], 'a delivery reached the service account');
});

test.serial('finding 1 replayed: the upload role stores an install request and has JetStream deliver it to the registry — nothing is installed', async (t) => {
  const forged = { user: 'alice', manifest: 'name: evil\n', providers: [], host: '127.0.0.1', credentials: { appKey: 'ak_evil', appSecret: randomBytes(24).toString('base64url') } };
  const consumer = { stream_name: uploadState.stream, config: { deliver_subject: 'pier.registry.app.install', deliver_group: 'registry', ack_policy: 'none', deliver_policy: 'all' } };
  // With the upload role's service identity (the review's attack as it was made).
  const service = await c.client('upload');
  await service.jetstream().publish(uploadState.subject, encode(forged)).catch(() => undefined);
  t.is(await verdict(service, `$JS.API.CONSUMER.CREATE.${uploadState.stream}`, consumer), 'refused');
  // With its state login: inside its own account the consumer is made (the account is the boundary).
  const state = await c.client('upload', true).catch(() => null);
  const from = heard.length;
  if (state) {
    await state.jetstream().publish(uploadState.subject, encode(forged));
    t.true((await verdict(state, `$JS.API.CONSUMER.CREATE.${uploadState.stream}`, consumer)).startsWith('accepted'));
  }
  t.deepEqual(await reached(from, ['pier.registry.app.install']), []);
  const apps = (await cli(['app', 'list', '--user', 'alice', '--json'], c.cliEnv)).json as Array<{ app: string }>;
  t.deepEqual(apps.map((a) => a.app), ['chat']);
});

test.serial('finding 2 replayed: a stream capturing _INBOX.> in a state account hears none of the service account\'s replies', async (t) => {
  const nc = await c.client('token', true);
  const s = tokenState.stream;
  const update = await verdict(nc, `$JS.API.STREAM.UPDATE.${s}`, { name: s, subjects: [tokenState.subject, '_INBOX.>'], num_replicas: 3, storage: 'file' });
  t.true(update.startsWith('accepted'), `its own stream may be changed inside its account: ${update}`);
  const bob = (await cli(['user', 'add', 'bob', '--json'], c.cliEnv)).json.token as string;
  t.truthy(bob);
  const info = JSON.parse(new TextDecoder().decode((await nc.request(`$JS.API.STREAM.INFO.${s}`, new Uint8Array(), { timeout: 5_000 })).data));
  const seen: string[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && seq > 0; seq++) {
    const r = JSON.parse(new TextDecoder().decode((await nc.request(`$JS.API.STREAM.MSG.GET.${s}`, new TextEncoder().encode(JSON.stringify({ seq })), { timeout: 5_000 })).data));
    if (r.message) seen.push(`${r.message.subject} ${Buffer.from(r.message.data ?? '', 'base64').toString('latin1')}`);
  }
  t.false(seen.some((m) => m.startsWith('_INBOX.pier-admin') || m.startsWith('_INBOX.pier-all.') || m.includes(bob)), 'a reply of the service account was captured');
  await verdict(nc, `$JS.API.STREAM.UPDATE.${s}`, { name: s, subjects: [tokenState.subject], num_replicas: 3, storage: 'file' });
});

/** A well-formed heartbeat of a process that does not exist, signed with its own key. */
function forgedBeat(role: string, n: number): Heartbeat {
  const signing = generateKeyPairSync('ed25519');
  const signKey = signing.publicKey.export({ format: 'jwk' }).x!;
  const key = generateKeyPairSync('x25519').publicKey.export({ format: 'jwk' }).x!;
  const body = { id: `forged-${role}-${n}`, busId: randomBytes(6).toString('hex'), roles: [role], pid: 1, host: 'h', startedAt: new Date().toISOString(), key, roleKeys: [], seq: 1, signKey };
  const sig = sign(null, Buffer.from(JSON.stringify([role, body.id, body.busId, body.key, body.roleKeys, body.seq, body.signKey])), signing.privateKey).toString('base64url');
  return { ...body, sig };
}

test.serial('finding 3 replayed: heartbeats announcing another role are refused by the server; forged callback replicas take no connection (10/10 delivered)', async (t) => {
  // Every identity tries every role's heartbeat subject: only its own gets through.
  const from = heard.length;
  for (const role of BUS_ROLES) {
    const nc = await c.client(role);
    for (const target of BUS_ROLES) nc.publish(`pier.process.heartbeat.${target}`, encode(forgedBeat(target, BUS_ROLES.indexOf(role))));
    await nc.flush().catch(() => undefined);
  }
  await sleep(500);
  const through = heard.slice(from).filter((m) => m.subject.startsWith('pier.process.heartbeat.') && decode<{ id: string }>(m.data).id.startsWith('forged-'));
  t.deepEqual(through.map((m) => `${m.subject} ${decode<{ id: string }>(m.data).id}`).sort(), BUS_ROLES.map((r, i) => `pier.process.heartbeat.${r} forged-${r}-${i}`).sort());

  // A stolen callback identity announces eight replicas that never answer, and keeps them alive.
  const cb = await c.client('callback');
  const beats = Array.from({ length: 8 }, (_, i) => forgedBeat('callback', 100 + i));
  // (Also on the one heartbeat subject of old, which any identity could publish: nobody may now.)
  const edgeIdentity = await c.client('edge');
  const timer = setInterval(() => {
    for (const b of beats) {
      cb.publish('pier.process.heartbeat.callback', encode({ ...b, seq: b.seq++ }));
      edgeIdentity.publish('pier.process.heartbeat', encode(b));
    }
  }, 200);
  t.teardown(() => clearInterval(timer));
  await sleep(800);
  const clients: Client[] = [];
  for (let i = 0; i < 10; i++) clients.push(await wsConnect(c.edges[0].ports!.public, 'chat.alice.localhost', { 'x-authorization': c.token, 'user-agent': `presence-${i}` }));
  clients.forEach((cl, i) => cl.ws.send(JSON.stringify({ n: i, tag: 'presence' })));
  await c.app.until(() => c.app.accepted.filter((k) => k.body.action === 'message' && JSON.stringify(k.body.data).includes('presence')).length === 10, 'the 10 messages at the app');
  t.is(c.app.accepted.filter((k) => k.body.action === 'message' && JSON.stringify(k.body.data).includes('presence')).length, 10);
  for (const cl of clients) cl.ws.close();
  clearInterval(timer);
});

/** The gateway connections an edge lists for alice's app (its local API). */
async function listed(edge: { ports: { local: number } | null }): Promise<Array<{ id: string; userAgent: string }>> {
  const r = await fetch(`http://127.0.0.1:${edge.ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': c.chat.OS_APP_KEY, 'x-app-secret': c.chat.OS_APP_SECRET } });
  return ((await r.json()).data?.[0]?.conns ?? []) as Array<{ id: string; userAgent: string }>;
}

test.serial('a killed edge\'s connections get their close although another edge identity replays its heartbeats', async (t) => {
  const doomedEdge = await c.startEdge('edge-doomed');
  const attacker = await c.client('edge');
  // The attacker hears the doomed edge's heartbeats (every identity may) and sends them again,
  // as they are and counted up (which breaks their signature), for as long as the test runs.
  let last: Heartbeat | null = null;
  // (The one heartbeat subject of old too: refused now, which the attacker does not mind.)
  for (const subject of ['pier.process.heartbeat.*', 'pier.process.heartbeat']) {
    attacker.subscribe(subject, {
      callback: (err, m) => {
        if (err) return;
        const b = decode<Heartbeat>(m.data);
        if (b.id === doomedEdge.instance) last = b;
      },
    });
  }
  const replay = setInterval(() => {
    if (!last) return;
    for (const subject of ['pier.process.heartbeat.edge', 'pier.process.heartbeat']) {
      attacker.publish(subject, encode(last));
      attacker.publish(subject, encode({ ...last, seq: last.seq + 1_000 }));
    }
  }, 100);
  t.teardown(() => clearInterval(replay));
  const doomed = await wsConnect(doomedEdge.ports!.public, 'chat.alice.localhost', { 'x-authorization': c.token, 'user-agent': 'doomed' });
  const connId = await until('the doomed connection listed and opened at the app', async () => {
    const id = (await listed(c.edges[0])).find((x) => x.userAgent === 'doomed')?.id;
    return id && c.app.of(id).length > 0 ? id : undefined;
  });
  await until('the attacker to hold a heartbeat of the doomed edge', () => last !== null);
  await doomedEdge.stop('SIGKILL');
  await c.app.until(() => c.app.of(connId).some((k) => k.body.action === 'close'));
  t.deepEqual(c.app.of(connId).map((k) => k.body.action), ['open', 'close']);
  await doomed.closed;
});

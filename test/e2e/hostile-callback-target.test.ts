import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { KeyPair, Sealer } from '../../bus/seal.js';
import { gatewaySubjects } from '../../bus/subjects.js';
import { readCredsFile } from '../../lib/config/nats-auth.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { sleep, until, within } from '../helpers/wait.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';

// docs/security.md "The bus": "The callback actor takes an app's callback target (host, port, path) from
// its own registry view, never from the event". Whoever holds the edge role's NATS credentials
// forges gateway events naming an attacker's server as the target, for its own app, another
// user's app and an app nobody installed: the attacker's server hears nothing, the forged events
// of installed apps go (signed) only where those apps listen, and the uninstalled one is refused.
let dir: string;
let bus: SecureBus;
let pier: PierProcess;
let edge: NatsConnection;
let alice: WsApp;
let bob: WsApp;
let attacker: WsApp;

test.before(async () => {
  dir = tempDir();
  bus = await SecureBus.start(dir);
  [alice, bob, attacker] = await Promise.all([WsApp.start(), WsApp.start(), WsApp.start()]);
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { ...bus.envFor('all'), PIER_HEARTBEAT_MS: '250', PIER_MASTER_KEY: randomBytes(32).toString('hex') }));
  const cliEnv = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  for (const [user, app, server] of [['alice', 'chat', alice], ['bob', 'notes', bob]] as const) {
    mustSucceed(await cli(['user', 'add', user, '--json'], cliEnv));
    writeFileSync(join(dir, `${app}.yaml`), wsManifest(app, server.port));
    mustSucceed(await cli(['app', 'install', '--user', user, '--manifest', join(dir, `${app}.yaml`)], cliEnv));
  }
  const { user, password } = readCredsFile(join(bus.dir, 'edge.nats.env'));
  edge = await connect({ servers: bus.url, tls: { caFile: bus.ca.cert }, user, pass: password, inboxPrefix: `_INBOX.${user}`, reconnect: false });
});

test.after.always(async () => {
  await edge?.close();
  await pier?.stop('SIGKILL');
  await Promise.all([alice?.stop(), bob?.stop(), attacker?.stop()]);
  await bus?.stop();
  cleanup(dir);
});

function mustSucceed(r: { code: number | null; stderr: string }): void {
  if (r.code !== 0) throw new Error(`pier cli failed: ${r.stderr}`);
}

/** A bus answer's value, read off the wire as any client would (docs/architecture.md: `{ok: true, data}`). */
function answerOf(bytes: Uint8Array): Record<string, unknown> {
  const reply = decode<{ ok: boolean; data?: Record<string, unknown>; error?: unknown }>(bytes);
  if (!reply.ok) throw new Error(`the replica refused the request itself: ${JSON.stringify(reply.error)}`);
  return reply.data!;
}

/** The callback replica's bus id and public key, from a heartbeat the edge identity may hear. */
function callbackReplica(nc: NatsConnection): Promise<{ busId: string; key: string; roleKeys: string[] }> {
  return within(
    'a heartbeat of the callback replica',
    new Promise<{ busId: string; key: string; roleKeys: string[] }>((resolve) => {
      const sub = nc.subscribe('pier.process.heartbeat.callback', {
        callback: (_err, m) => {
          sub.unsubscribe();
          resolve(decode<{ busId: string; key: string; roleKeys: string[] }>(m.data));
        },
      });
    }),
  );
}

/**
 * An event as an edge sends it: sealed to the callback role's anchored key (the cookie it may carry
 * crosses the bus sealed; the key is public, in the anchors and in every callback heartbeat).
 * Sealing is not a credential: whoever holds the edge identity can seal.
 */
const sealer = new Sealer(KeyPair.generate());
const sealedEvent = (replica: { busId: string; roleKeys: string[] }, ev: Record<string, unknown>) => sealer.seal(encode(ev), replica.roleKeys[0], `${gatewaySubjects.deliver(replica.busId)}|request|`);

/** A forged `open` whose `target` is the attacker's server (the field the old event carried). */
function forged(user: string, app: string): Record<string, unknown> {
  const edgeId = randomBytes(6).toString('hex');
  const connId = `${edgeId}.${randomBytes(16).toString('base64url')}`;
  return {
    eventId: `${connId}:1`,
    connId,
    edge: edgeId,
    user,
    app,
    seq: 1,
    oldest: 1,
    action: 'open',
    data: {},
    cookie: null,
    target: { host: '127.0.0.1', port: attacker.port, url: '/steal' },
  };
}

async function refusedCount(reason: string): Promise<number> {
  const text = await (await fetch(`${pier.adminUrl}/metrics`)).text();
  return [...text.matchAll(new RegExp(`^pier_callbacks_refused_total\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
}

test("forged events with the edge's credentials never reach a target they name; an unknown app is refused", async (t) => {
  const replica = await callbackReplica(edge);
  const subject = gatewaySubjects.deliver(replica.busId);
  const ask = async (ev: Record<string, unknown>) => answerOf((await edge.request(subject, sealedEvent(replica, ev), { timeout: 5_000 })).data);

  // An app of the edge's "own" user and one of another user: both are known to the registry.
  const mine = forged('alice', 'chat');
  const theirs = forged('bob', 'notes');
  t.deepEqual(await ask(mine), { ok: true, closed: false });
  t.deepEqual(await ask(theirs), { ok: true, closed: false });
  // The replica took them: wherever they went, they went within the wait (before the fix, to the
  // attacker; after it, to where the registry says these apps listen).
  const landed = (server: WsApp, ev: Record<string, unknown>) => server.of(ev.connId as string).length + attacker.of(ev.connId as string).length > 0;
  await until('the two forged opens to be delivered somewhere', () => landed(alice, mine) && landed(bob, theirs));
  t.deepEqual(attacker.accepted.map((c) => c.url), [], "the attacker's server received nothing");
  t.is(alice.of(mine.connId as string).length, 1, "alice's event went to alice's app");
  t.is(bob.of(theirs.connId as string).length, 1, "bob's event went to bob's app");
  t.is(alice.of(mine.connId as string)[0].url, '/ws/message', "the app's own path, not the event's");

  // An app nobody installed: refused with an error, counted, delivered nowhere.
  const before = await refusedCount('unknown_app');
  const ghost = await ask(forged('alice', 'ghost'));
  t.is(ghost.ok, false, `answered ${JSON.stringify(ghost)}`);
  t.is((ghost.error as { code?: string } | undefined)?.code, 'NOT_FOUND');
  await until('the refusal to be counted', async () => (await refusedCount('unknown_app')) > before);
  t.regex(pier.logs, /"reason":"unknown_app".*"gateway callback refused"/, 'logged at warn');

  // A bounded wait for anything late (a retry of a failed attempt comes within 100 ms).
  await sleep(1_500);
  t.deepEqual(attacker.accepted.map((c) => c.url), [], "the attacker's server received nothing");
  t.is(attacker.refused, 0);
  t.false(pier.logs.includes('/steal'), 'the forged target is nowhere in the logs either');
  t.true(pier.proc.exitCode === null && pier.proc.signalCode === null, `the process is up: ${pier.stderr}`);
});

test("an app registered with one of Pier's own ports as its callback is refused by the address policy", async (t) => {
  // alice's app "probe" says its callbacks go to Pier's admin listener on this host.
  const cliEnv = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  writeFileSync(join(dir, 'probe.yaml'), wsManifest('probe', pier.ports!.admin!));
  mustSucceed(await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'probe.yaml'), '--host', '127.0.0.1'], cliEnv));
  const replica = await callbackReplica(edge);
  const before = await refusedCount('address_policy');
  const probe = forged('alice', 'probe');
  const ack = answerOf((await edge.request(gatewaySubjects.deliver(replica.busId), sealedEvent(replica, probe), { timeout: 5_000 })).data);
  t.deepEqual(ack, { ok: true, closed: false }, 'the app is known: the event is taken');
  await until('the policy refusal to be counted', async () => (await refusedCount('address_policy')) > before);
  t.regex(pier.logs, /"reason":"address_policy".*"gateway callback refused"/);
  t.deepEqual(attacker.accepted, []);
});

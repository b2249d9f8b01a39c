import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { encode } from '../../bus/codec.js';
import { tokenState } from '../../bus/subjects.js';
import { FailureLimiter } from '../../lib/policy/rate-limit.js';
import { SharedFailures } from '../../actors/token/shared-failures.js';
import { startJetStreamCluster, type NatsServer } from '../helpers/nats-server.js';
import { until } from '../helpers/wait.js';

const WINDOW = 60_000;
const LIMIT = 5;

// Token replicas on three "hosts" of a 3-node JetStream cluster (R3), each with its own limiters.
let dir: string;
let nodes: NatsServer[];
const conns: NatsConnection[] = [];
const started: SharedFailures[] = [];

async function replica(node: number) {
  const nc = await connect({ servers: nodes[node].url });
  conns.push(nc);
  const limiters = { key: new FailureLimiter(LIMIT, WINDOW, Date.now), client: new FailureLimiter(50, WINDOW, Date.now) };
  started.push(await SharedFailures.start(nc.jetstream(), () => nc.jetstreamManager(), limiters, { replicas: 3, windowMs: WINDOW }));
  return { ...limiters, nc };
}

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pier-failures-'));
  nodes = await startJetStreamCluster(dir, 3);
});

test.after.always(async () => {
  for (const s of started) s.close();
  await Promise.all(conns.map((c) => c.close()));
  await Promise.all((nodes ?? []).map((n) => n.stop()));
  rmSync(dir, { recursive: true, force: true });
});

test.serial('failures spread over two replicas block the key on both; a replica started later knows the window; a blocked key appends nothing more', async (t) => {
  const a = await replica(0);
  const b = await replica(1);
  for (let i = 0; i < LIMIT; i++) (i % 2 ? a : b).key.fail('app-key\u0000203.0.113.9');
  await until('both replicas to count all five failures', () => a.key.count('app-key\u0000203.0.113.9') === LIMIT && b.key.count('app-key\u0000203.0.113.9') === LIMIT);
  t.true(a.key.blocked('app-key\u0000203.0.113.9'));
  t.true(b.key.blocked('app-key\u0000203.0.113.9'));
  t.false(a.key.blocked('app-key\u0000203.0.113.10'), 'another address is not blocked');

  // An attacker hammering a blocked key: counted locally, not appended again.
  for (let i = 0; i < 100; i++) a.key.fail('app-key\u0000203.0.113.9');
  const c = await replica(2);
  t.true(c.key.blocked('app-key\u0000203.0.113.9'), 'the late replica read the window first');
  const jsm = await a.nc.jetstreamManager();
  const messages = (await jsm.streams.info(tokenState.stream)).state.messages;
  t.true(messages <= LIMIT + 1, `appended ${messages} failures for one key (the limit's worth, not 105)`);
});

test.serial('hostile: garbage, a wrong shape and an oversized key on the stream are ignored; the replicas keep counting', async (t) => {
  const a = await replica(0);
  const js = a.nc.jetstream();
  await js.publish(tokenState.subject, new Uint8Array([0xc1, 0xff]));
  await js.publish(tokenState.subject, encode({ limiter: 'nope', key: 'k', at: Date.now(), origin: 'x' }));
  await js.publish(tokenState.subject, encode({ limiter: 'key', key: 'k'.repeat(10_000), at: Date.now(), origin: 'x' }));
  await js.publish(tokenState.subject, encode({ limiter: 'key', key: 'forged', at: Date.now(), origin: 'x' }));
  await until('the well-formed failure to be counted', () => a.key.count('forged') === 1);
  t.is(a.key.count('k'.repeat(10_000)), 0);
  const b = await replica(1);
  t.is(b.key.count('forged'), 1, 'a replica started later reads past the garbage');
});

test.serial('hostile: a failure dated far in the future counts as now, so it expires with its window', async (t) => {
  const a = await replica(0);
  await a.nc.jetstream().publish(tokenState.subject, encode({ limiter: 'client', key: '198.51.100.7', at: Date.now() + 10 * 365 * 86_400_000, origin: 'x' }));
  await until('the failure to be counted', () => a.client.count('198.51.100.7') === 1);
  // Its window starts now, not in ten years: one window later it is gone.
  const clock = { now: Date.now() };
  const l = new FailureLimiter(50, WINDOW, () => clock.now);
  l.record('198.51.100.7', clock.now + 10 * 365 * 86_400_000);
  clock.now += WINDOW;
  t.is(l.count('198.51.100.7'), 0, 'gone one window later');
});

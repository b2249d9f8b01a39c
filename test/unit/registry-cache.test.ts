import { ask, tell } from '../../bus/verbs.js';
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { MemoryBus } from '../../bus/bus-memory.js';
import { PierError } from '../../bus/errors.js';
import { encode } from '../../bus/codec.js';
import { registry, registryEvents } from '../../bus/subjects.js';
import { startRegistry } from '../../actors/registry/index.js';
import { loadConfig } from '../../lib/config/config.js';
import { createLogger } from '../../lib/runtime/log.js';
import { Metrics } from '../../lib/runtime/metrics.js';
import { RegistryCache } from '../../lib/state/registry-cache.js';
import { cleanup, tempDir } from '../helpers/pier.js';
import { Writable } from 'node:stream';
import { until } from '../helpers/wait.js';

const silent = createLogger({ level: 'silent', name: 'test', destination: new Writable({ write: (_c, _e, cb) => cb() }) });

async function setup(t: { teardown(fn: () => Promise<void> | void): void }, staleMs = 5_000, log = silent) {
  const dir = tempDir();
  const config = loadConfig({ PIER_DATA_DIR: dir, PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_REGISTRY_HEARTBEAT_MS: '100' });
  const bus = new MemoryBus();
  const metrics = new Metrics('test');
  const reg = await startRegistry({ bus, config, log: silent, metrics, now: Date.now });
  let clock = Date.now();
  const cache = new RegistryCache(bus, { maxStalenessMs: staleMs, log, metrics, now: () => clock });
  cache.start();
  await cache.ready();
  t.teardown(async () => {
    cache.stop();
    await reg.stop();
    await bus.close();
    cleanup(join(dir));
  });
  return { bus, cache, advance: (ms: number) => (clock += ms), setClock: () => (clock = Date.now()) };
}

test('a new token is known to the cache, and its revocation too', async (t) => {
  const { bus, cache } = await setup(t);
  const { token } = await ask(bus, registry.userAdd, { name: 'alice' });
  await until('the new token in the cache', () => cache.userForToken(token) === 'alice');
  t.is(cache.userForToken('pier_nope'), undefined);
  await ask(bus, registry.userRevoke, { name: 'alice' });
  await until('the revoked token gone from the cache', () => cache.userForToken(token) === undefined);
  t.pass();
});

test('a missed change event is recovered from the heartbeat', async (t) => {
  const { bus, cache } = await setup(t);
  const before = cache.currentRevision();
  // Commit a change while the cache is deaf to change events: only the heartbeat tells it.
  const deaf = (cache as any).subs[0];
  deaf.unsubscribe();
  const { token } = await ask(bus, registry.userAdd, { name: 'bob' });
  await until('the cache to move past the old revision', () => cache.currentRevision() > before);
  t.is(cache.userForToken(token), 'bob');
});

test('an out-of-order event triggers a reload instead of being applied on a gap', async (t) => {
  const { bus, cache } = await setup(t);
  await ask(bus, registry.userAdd, { name: 'carol' });
  await until('the cache at revision 1', () => cache.currentRevision() === 1);
  // A forged event from the future: the cache must not trust it, and must reload to the truth.
  tell(bus, registryEvents.changes, { revision: 7, changes: [{ kind: 'token', op: 'put', value: { digest: 'x', user: 'carol' } }] });
  // A real change after it: events are handled in the order published, so once the cache holds
  // revision 2 it has dealt with the forged one (had it been applied, the cache would be at 7).
  const { token } = await ask(bus, registry.userAdd, { name: 'dave' });
  await until('the cache to reach the real revision 2, past the forged event', () => cache.currentRevision() >= 2);
  t.is(cache.currentRevision(), 2);
  t.is(cache.userForToken(token), 'dave');
});

test('a cache that has not heard the registry refuses to answer (503)', async (t) => {
  const { cache, advance } = await setup(t, 1_000);
  advance(60_000);
  const err = t.throws(() => cache.userForToken('pier_x'), { instanceOf: PierError });
  t.is(err!.code, 'UNAVAILABLE');
  t.false(cache.isFresh());
});

test('the registry going stale and coming back is logged, once each', async (t) => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', name: 'test', destination: new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }) });
  const { cache, advance, setClock } = await setup(t, 1_000, log);
  const said = (msg: string) => lines.filter((l) => JSON.parse(l).msg === msg).length;
  cache.checkFreshness();
  advance(60_000);
  cache.checkFreshness();
  cache.checkFreshness();
  t.is(said('registry not heard: requests that need it answer 503 until it is'), 1);
  setClock();
  await until('a registry heartbeat to be heard', () => cache.isFresh());
  cache.checkFreshness();
  cache.checkFreshness();
  t.is(said('registry heard again'), 1);
});

/** A cache on `bus` with a clock of the test's, loaded; stopped (and the bus closed) when the test ends. */
async function startedCache(t: ExecutionContext, bus: MemoryBus, now: () => number, snapshotTimeoutMs = 50): Promise<RegistryCache> {
  // A snapshot question a silent replica leaves unanswered is asked again after 50 ms, not 1 s.
  const cache = new RegistryCache(bus, { maxStalenessMs: 5_000, log: silent, metrics: new Metrics('test'), now, snapshotTimeoutMs });
  cache.start();
  t.teardown(async () => {
    cache.stop();
    await bus.close();
  });
  await cache.ready();
  return cache;
}

test('a cache that knows it is behind the registry (a change event lost, the snapshot that would repair it not answered) stops answering within the revocation bound', async (t) => {
  const bus = new MemoryBus();
  let clock = 1_000_000;
  const snapshot = (revision: number) => ({ revision, users: [], tokens: [], apps: [], providers: [] });
  // A registry replica that answers its first snapshot, then is paused (no answer at all).
  let answering = true;
  let revision = 1;
  bus.subscribe(registry.snapshot.subject, (m) => {
    if (answering && m.reply) bus.publish(m.reply, encode({ ok: true, data: snapshot(revision) }));
  });
  const cache = await startedCache(t, bus, () => clock);
  t.true(cache.isFresh());
  answering = false;
  // The registry moved to revision 3 (the change event never came); its heartbeat says so.
  tell(bus, registryEvents.heartbeat, { revision: 3, instance: 'r1', seq: 1 });
  await bus.flush();
  t.true(cache.isFresh(), 'a moment behind is normal: the snapshot is on its way');
  clock += 600;
  t.false(cache.isFresh(), 'behind for longer: 503, not the old tokens');
  t.throws(() => cache.userForToken('anything'), { message: /registry is not reachable/ });
  // The registry answers again: the cache catches up and answers again.
  revision = 3;
  answering = true;
  await until('the cache to catch up with revision 3', () => cache.currentRevision() === 3, 10_000);
  t.true(cache.isFresh());
});

test('hostile: made-up tokens (by the thousand, 8 KiB long) are not remembered; a real token is, until it is revoked, and is refused then', async (t) => {
  const { bus, cache } = await setup(t);
  const remembered = () => [...(cache as unknown as { digests: { digests: Map<string, string> } }).digests.digests.keys()];
  const { token } = await ask(bus, registry.userAdd, { name: 'erin' });
  await until('the new token in the cache', () => cache.userForToken(token) === 'erin');
  for (let i = 0; i < 10_000; i++) t.is(cache.userForToken(`pier_made_up_${i}_${'x'.repeat(8_192)}`), undefined);
  t.deepEqual(remembered(), [token], 'only the user\'s token is remembered');
  await ask(bus, registry.userRevoke, { name: 'erin' });
  await until('the revoked token refused', () => cache.userForToken(token) === undefined);
  t.deepEqual(remembered(), [], 'and no revoked token stays in memory');
});

test('hostile: a heartbeat played back (the same replica, a count not newer) does not keep a cache fresh; an old change played back does not either', async (t) => {
  let clock = 1_000_000;
  const bus = new MemoryBus();
  bus.subscribe(registry.snapshot.subject, (m) => m.reply && bus.publish(m.reply, encode({ ok: true, data: { revision: 1, users: [], tokens: [], apps: [], providers: [] } })));
  const cache = await startedCache(t, bus, () => clock);
  tell(bus, registryEvents.heartbeat, { revision: 1, instance: 'r1', seq: 7 });
  await bus.flush();
  // The registry falls silent; a thief plays its last heartbeat and an old change back, again and again.
  for (let i = 0; i < 6; i++) {
    clock += 1_000;
    tell(bus, registryEvents.heartbeat, { revision: 1, instance: 'r1', seq: 7 });
    tell(bus, registryEvents.heartbeat, { revision: 1, instance: 'r1', seq: 3 });
    tell(bus, registryEvents.changes, { revision: 1, changes: [] });
    await bus.flush();
  }
  t.false(cache.isFresh(), 'six seconds of played-back beats past a 5 s staleness bound: 503');
  // A newer beat of the replica is news.
  tell(bus, registryEvents.heartbeat, { revision: 1, instance: 'r1', seq: 8 });
  await bus.flush();
  t.true(cache.isFresh());
});

test('a cache whose bus connection was lost refuses (503) until a heartbeat heard after it names no revision it lacks', async (t) => {
  const bus = new MemoryBus();
  let losses = 0;
  // The memory bus never loses its connection: this one does when the test says (a NATS node killed under it).
  Object.assign(bus, { connectionLosses: () => losses });
  const clock = 1_000_000;
  bus.subscribe(registry.snapshot.subject, (m) => {
    if (m.reply) bus.publish(m.reply, encode({ ok: true, data: { revision: 2, users: [], tokens: [], apps: [], providers: [] } }));
  });
  const cache = await startedCache(t, bus, () => clock);
  t.true(cache.isFresh());
  losses = 1; // a change event published meanwhile never arrives
  const err = t.throws(() => cache.userForToken('pier_x'), { instanceOf: PierError });
  t.is(err!.code, 'UNAVAILABLE');
  // A heartbeat heard after the loss, naming the revision the cache has: nothing was missed.
  tell(bus, registryEvents.heartbeat, { revision: 2, instance: 'r1', seq: 1 });
  await bus.flush();
  t.true(cache.isFresh(), 'whole again');
  t.is(cache.userForToken('pier_x'), undefined);
  // Another loss, and the heartbeat after it names a newer revision: whole only once it is loaded.
  losses = 2;
  t.false(cache.isFresh());
});

test('a change event that fills the gap a heartbeat or a later event showed is applied at once: the cache does not wait (503) for the snapshot it asked meanwhile', async (t) => {
  const bus = new MemoryBus();
  let clock = 1_000_000;
  const snapshot = (revision: number) => ({ revision, users: [], tokens: [], apps: [], providers: [] });
  // A registry replica that answers the first snapshot at once and the later ones only when the test
  // says (a replica slow to answer, or an event loop busy for longer than BEHIND_MS on a loaded host).
  const held: string[] = [];
  let first = true;
  bus.subscribe(registry.snapshot.subject, (m) => {
    if (!m.reply) return;
    if (first) bus.publish(m.reply, encode({ ok: true, data: snapshot(1) }));
    else held.push(m.reply);
    first = false;
  });
  const cache = new RegistryCache(bus, { maxStalenessMs: 5_000, log: silent, metrics: new Metrics('test'), now: () => clock, snapshotTimeoutMs: 5_000 });
  cache.start();
  t.teardown(async () => {
    cache.stop();
    await bus.close();
  });
  await cache.ready();
  const token = (digest: string) => ({ kind: 'token', op: 'put', value: { digest, user: 'u' } }) as const;
  // One registry replica's heartbeat names revision 2 before the other's change event 2 arrives.
  tell(bus, registryEvents.heartbeat, { revision: 2, instance: 'r1', seq: 1 });
  await bus.flush();
  tell(bus, registryEvents.changes, { revision: 2, changes: [token('d2')] });
  await bus.flush();
  // Two replicas' change events in the wrong order: 4 before 3 (the gap asks for a snapshot).
  tell(bus, registryEvents.changes, { revision: 4, changes: [token('d4')] });
  await bus.flush();
  t.is(held.length, 1, 'the cache asked for a snapshot');
  tell(bus, registryEvents.changes, { revision: 3, changes: [token('d3')] });
  await bus.flush();
  clock += 600;
  t.is(cache.currentRevision(), 4, 'every change up to 4 applied, in order, without the snapshot');
  t.true(cache.isFresh(), 'nothing missing: no 503 while the snapshot is on its way');
  t.false(cache.tokenRevoked('d3'));
  // The snapshot answers late, at an older revision: it takes nothing back.
  for (const reply of held.splice(0)) bus.publish(reply, encode({ ok: true, data: snapshot(2) }));
  await bus.flush();
  await new Promise((r) => setTimeout(r, 10));
  t.is(cache.currentRevision(), 4);
  t.false(cache.tokenRevoked('d4'));
  t.true(cache.isFresh());
});

test('a heartbeat a moment ahead of its change event asks no snapshot: the event comes first; one still behind after the wait asks', async (t) => {
  const bus = new MemoryBus();
  let asked = 0;
  let revision = 1;
  bus.subscribe(registry.snapshot.subject, (m) => {
    asked++;
    if (m.reply) bus.publish(m.reply, encode({ ok: true, data: { revision, users: [], tokens: [], apps: [], providers: [] } }));
  });
  // It counts the snapshots asked: one answered late on a busy machine must not be asked again.
  const cache = await startedCache(t, bus, Date.now, 10_000);
  t.is(asked, 1);
  tell(bus, registryEvents.heartbeat, { revision: 2, instance: 'r1', seq: 1 });
  tell(bus, registryEvents.changes, { revision: 2, changes: [] });
  await bus.flush();
  await new Promise((r) => setTimeout(r, 200));
  t.is(cache.currentRevision(), 2);
  t.is(asked, 1, 'no snapshot for a change whose event came');
  // A change whose event is lost: the heartbeat's snapshot repairs it.
  revision = 3;
  tell(bus, registryEvents.heartbeat, { revision: 3, instance: 'r1', seq: 2 });
  await until('the cache to load revision 3', () => cache.currentRevision() === 3);
  t.is(asked, 2);
  t.true(cache.isFresh());
});

import test from 'ava';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { encode } from '../../../bus/codec.js';
import type { Heartbeat, ProcessInfo } from '../../../bus/subjects.js';
import { KeyPair } from '../../../bus/seal.js';
import { Peers } from '../../../lib/runtime/peers.js';
import { until } from '../../helpers/wait.js';

const info = (id: string, roles: string[]): ProcessInfo => ({ id, busId: randomBytes(6).toString('hex'), roles, pid: 1, host: 'h', startedAt: '' });

function watcher(bus: MemoryBus, refused: string[] = []) {
  const p = new Peers(bus, info('watcher', ['admin']), { intervalMs: 60_000, deadAfterMs: 60_000, key: KeyPair.generate().publicKey, onRefused: (w) => refused.push(w), maxPeers: 20 });
  p.start();
  return p;
}

/** A heartbeat as an attacker makes it: well formed, signed with a key of its own. */
function forged(role: string, base: Partial<Heartbeat> = {}, signing = generateKeyPairSync('ed25519')): Heartbeat {
  const signKey = signing.publicKey.export({ format: 'jwk' }).x!;
  const body = { ...info(`forged-${randomBytes(3).toString('hex')}`, [role]), key: KeyPair.generate().publicKey, roleKeys: [], seq: 1, signKey, ...base };
  const sig = sign(null, Buffer.from(JSON.stringify([role, body.id, body.busId, body.key, body.roleKeys, body.seq, body.signKey])), signing.privateKey).toString('base64url');
  return { ...body, signKey, sig };
}

test('a heartbeat counts for the role its subject names, not the roles its body claims', async (t) => {
  const bus = new MemoryBus();
  const w = watcher(bus);
  const real = new Peers(bus, info('edge-1', ['edge']), { intervalMs: 50, deadAfterMs: 1_000, key: KeyPair.generate().publicKey });
  real.start();
  t.teardown(() => (real.stop(), w.stop()));
  // A process of role edge claiming in its body to be a callback replica as well.
  bus.publish('pier.process.heartbeat.edge', encode(forged('edge', { roles: ['edge', 'callback', 'vault'] })));
  await until('both edges seen', () => w.alive('edge').length === 2);
  t.deepEqual(w.alive('callback'), []);
  t.deepEqual(w.alive('vault'), []);
});

test('a replayed heartbeat, one counted up without its key, and a second claimant of a live id are all refused', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const w = watcher(bus, refused);
  t.teardown(() => w.stop());
  const signing = generateKeyPairSync('ed25519');
  const first = forged('edge', {}, signing);
  bus.publish('pier.process.heartbeat.edge', encode(first));
  await until('the edge seen', () => w.alive('edge').length === 1);
  bus.publish('pier.process.heartbeat.edge', encode(first)); // the same again: a replay
  bus.publish('pier.process.heartbeat.edge', encode({ ...first, seq: 99 })); // counted up, signature now wrong
  bus.publish('pier.process.heartbeat.edge', encode(forged('edge', { id: first.id, busId: first.busId }))); // another key for the same id
  await until('three refusals', () => refused.length === 3);
  t.regex(refused[0], /replayed/);
  t.regex(refused[1], /bad signature/);
  t.regex(refused[2], /second claimant/);
  // The one who holds the key goes on counting up.
  bus.publish('pier.process.heartbeat.edge', encode(forged('edge', { ...first, seq: 2 }, signing)));
  await bus.flush();
  t.is(refused.length, 3);
});

test('at most maxPeers processes are tracked: a flood of announcements is refused past the bound', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const w = watcher(bus, refused);
  t.teardown(() => w.stop());
  for (let i = 0; i < 30; i++) bus.publish('pier.process.heartbeat.callback', encode(forged('callback')));
  await until('ten refusals', () => refused.length === 10);
  t.is(w.alive('callback').length, 20);
});

test('the key a request is sealed to is one every live replica announced (a master key rotation in progress)', async (t) => {
  const bus = new MemoryBus();
  const w = watcher(bus);
  t.teardown(() => w.stop());
  const [oldKey, newKey] = [KeyPair.generate().publicKey, KeyPair.generate().publicKey];
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [oldKey] })));
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [newKey, oldKey] })));
  await until('two vault replicas', () => w.alive('vault').length === 2);
  t.is(w.recipientFor('vault', [newKey, oldKey]), oldKey);
  t.is(w.recipientFor('registry', [KeyPair.generate().publicKey]), null);
  t.is(await w.recipientWithin('registry', [KeyPair.generate().publicKey], 50), null);
});

test('a key announced but not anchored is never sealed to, even when it is the only one announced (a thief of the role\'s identity)', async (t) => {
  const bus = new MemoryBus();
  const w = watcher(bus);
  t.teardown(() => w.stop());
  const [anchored, thief] = [KeyPair.generate().publicKey, KeyPair.generate().publicKey];
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [thief] })));
  await until('the thief\'s heartbeat heard', () => w.alive('vault').length === 1);
  t.is(w.recipientFor('vault', [anchored]), null);
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [anchored] })));
  await until('the real replica heard', () => w.alive('vault').length === 2);
  t.is(w.recipientFor('vault', [anchored]), anchored, 'the thief\'s beat counts for nothing beside the real replica');
});

test('replicas holding no anchored key in common (a rotation half done): nothing is sealed by the directory, and it is said once', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const w = watcher(bus, refused);
  t.teardown(() => w.stop());
  const [oldKey, newKey] = [KeyPair.generate().publicKey, KeyPair.generate().publicKey];
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [oldKey] })));
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [newKey] })));
  await until('two vault replicas', () => w.alive('vault').length === 2);
  t.is(w.recipientFor('vault', [newKey, oldKey]), null);
  t.is(w.recipientFor('vault', [newKey, oldKey]), null);
  t.is(refused.filter((r) => /no anchored key in common/.test(r)).length, 1);
});

test('a process running the role seals to its own role key, whatever others announce', async (t) => {
  const bus = new MemoryBus();
  const own = KeyPair.generate().publicKey;
  const p = new Peers(bus, info('vault-1', ['vault']), { intervalMs: 60_000, deadAfterMs: 60_000, key: KeyPair.generate().publicKey, roleKeys: () => [own] });
  p.start();
  t.teardown(() => p.stop());
  bus.publish('pier.process.heartbeat.vault', encode(forged('vault', { roleKeys: [KeyPair.generate().publicKey] })));
  await until('the other vault replica heard', () => p.alive('vault').length === 2);
  t.is(p.recipientFor('vault', [own]), own);
});

test('one role announcing more than its share cannot crowd out another role', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const w = watcher(bus, refused);
  t.teardown(() => w.stop());
  for (let i = 0; i < 25; i++) bus.publish('pier.process.heartbeat.upload', encode(forged('upload')));
  bus.publish('pier.process.heartbeat.edge', encode(forged('edge')));
  await until('the edge heard despite the flood', () => w.alive('edge').length === 1);
  t.is(w.alive('upload').length, 20);
  t.true(refused.every((r) => /upload processes announced/.test(r)));
});

test('a process cut off from the bus (or paused) declares nobody dead for its own silence; a peer that really died still is, one window later', async (t) => {
  const bus = new MemoryBus();
  const clock = { t: 1_000_000 };
  const now = () => clock.t;
  // The watcher's view of the bus, with a switch: while cut, it neither hears nor is heard (a NATS
  // connection down, or a SIGSTOP).
  const link = { up: true };
  const cut: typeof bus = Object.create(bus);
  cut.publish = (subject, data, options) => (link.up ? bus.publish(subject, data, options) : undefined);
  cut.subscribe = (subject, handler, options) => bus.subscribe(subject, (m) => link.up && handler(m), options);
  // A death bound of 200 ms of the test's clock: the blackout below is 25 of them, and a real death
  // is seen after some 10 steps of 20 ms (each waiting for two real beats of 10 ms).
  const callback = new Peers(cut, info('callback-1', ['callback']), { intervalMs: 10, deadAfterMs: 200, key: KeyPair.generate().publicKey, now });
  const edge = new Peers(bus, info('edge-1', ['edge']), { intervalMs: 10, deadAfterMs: 200, key: KeyPair.generate().publicKey, now });
  const deaths: string[] = [];
  callback.onDeath((p) => deaths.push(p.id));
  let edgeBeats = 0;
  let callbackBeats = 0;
  bus.subscribe('pier.process.heartbeat.edge', () => edgeBeats++);
  bus.subscribe('pier.process.heartbeat.callback', () => callbackBeats++);
  callback.start();
  edge.start();
  t.teardown(() => (callback.stop(), edge.stop()));
  await until('the callback replica to see the edge', () => callback.alive('edge').length === 1, 5_000);

  // Cut off for far longer than the death bound: every beat meanwhile finds the edge silent.
  link.up = false;
  clock.t += 5_000;
  const seen = edgeBeats;
  await until('several beats during the blackout', () => edgeBeats >= seen + 5, 5_000);
  t.deepEqual(deaths, [], 'nobody declared dead while the watcher could not hear itself');

  // Back: it hears itself, and the edge has a fresh window.
  link.up = true;
  const before = callbackBeats;
  await until('the callback replica heard on the bus again', () => callbackBeats >= before + 3, 5_000);
  t.deepEqual(deaths, []);
  t.is(callback.alive('edge').length, 1, 'the live edge is still alive');

  // A real death is still seen: the edge stops, and a window later it is dead. (Time moves in
  // steps the watcher's own beats keep up with: one leap would be a blackout of its own.)
  edge.stop();
  for (let step = 0; step < 200 && !deaths.includes('edge-1'); step++) {
    clock.t += 20; // below the 30 ms (3 beats) after which the watcher counts itself cut off
    const at = callbackBeats;
    await until('the watcher to beat at the new time', () => callbackBeats >= at + 2, 5_000, 2);
  }
  t.deepEqual(deaths, ['edge-1']);
});

// The other side of the same silence: a process that did not hear itself for nearly the death
// bound may have been declared dead by the others (an edge then fences itself: gateway.ts). A chaos
// run saw an edge paused 3 s keep forwarding frames for connections whose close the cluster had raised.
test('a process that has not heard itself for nearly the death bound knows it may have been declared dead; hearing itself again ends that', async (t) => {
  const bus = new MemoryBus();
  const clock = { t: 1_000_000 };
  const link = { up: true };
  const cut: typeof bus = Object.create(bus);
  cut.publish = (subject, data, options) => (link.up ? bus.publish(subject, data, options) : undefined);
  cut.subscribe = (subject, handler, options) => bus.subscribe(subject, (m) => link.up && handler(m), options);
  const edge = new Peers(cut, info('edge-1', ['edge']), { intervalMs: 10, deadAfterMs: 1_000, key: KeyPair.generate().publicKey, now: () => clock.t });
  let beats = 0;
  bus.subscribe('pier.process.heartbeat.edge', () => beats++);
  edge.start();
  t.teardown(() => edge.stop());
  await until('its first beats', () => beats >= 2, 5_000);
  t.false(edge.mayBeDeclaredDead());
  link.up = false;
  clock.t += 980; // within one interval of the bound: not yet
  t.false(edge.mayBeDeclaredDead());
  clock.t += 20;
  t.true(edge.mayBeDeclaredDead(), 'its last beat may be a death bound old for the others');
  link.up = true;
  const at = beats;
  await until('it hears itself again', () => beats >= at + 2 && !edge.mayBeDeclaredDead(), 5_000);
  t.false(edge.mayBeDeclaredDead());
});

test('hostile: another id announcing a live process\'s bus id is refused; notices are believed only from the live one', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const w = watcher(bus, refused);
  t.teardown(() => w.stop());
  const realSigning = generateKeyPairSync('ed25519');
  const real = forged('edge', { busId: 'b00000000001' }, realSigning);
  bus.publish('pier.process.heartbeat.edge', encode(real));
  await until('the real edge heard', () => w.alive('edge').length === 1);
  const thiefSigning = generateKeyPairSync('ed25519');
  bus.publish('pier.process.heartbeat.edge', encode(forged('edge', { busId: 'b00000000001' }, thiefSigning)));
  await until('the claim refused', () => refused.some((r) => /second claimant of the live bus id b00000000001/.test(r)));
  t.is(w.alive('edge').length, 1);
  const notice = Buffer.from('moved');
  t.true(w.signedByBus('b00000000001', 'edge', notice, sign(null, notice, realSigning.privateKey).toString('base64url')));
  t.false(w.signedByBus('b00000000001', 'edge', notice, sign(null, notice, thiefSigning.privateKey).toString('base64url')));
});

test.serial('the wall clock stepped forward (NTP, a VM resumed) makes nobody silent: liveness is measured on a monotonic clock', async (t) => {
  // Date.now() as this test steers it (serial: no other test runs meanwhile), in place before the
  // processes start, as a clock they might read.
  const realNow = Date.now;
  let step = 0;
  Date.now = () => realNow() + step;
  const bus = new MemoryBus();
  const edge = new Peers(bus, info('edge-1', ['edge']), { intervalMs: 50, deadAfterMs: 1_000, key: KeyPair.generate().publicKey });
  const replica = new Peers(bus, info('cb-1', ['callback']), { intervalMs: 50, deadAfterMs: 1_000, key: KeyPair.generate().publicKey });
  const deaths: string[] = [];
  replica.onDeath((p) => deaths.push(p.id));
  edge.start();
  replica.start();
  t.teardown(() => {
    Date.now = realNow;
    edge.stop();
    replica.stop();
  });
  await until('each to hear the other', () => replica.alive('edge').length === 1 && edge.alive('callback').length === 1 && !edge.mayBeDeclaredDead());
  step = 60_000; // one minute forward, at once
  t.false(edge.mayBeDeclaredDead(), 'the edge does not fence itself for a clock step');
  await new Promise((r) => setTimeout(r, 200));
  t.deepEqual(deaths, [], 'the replica declares no live edge dead');
  t.is(replica.alive('edge').length, 1);
});

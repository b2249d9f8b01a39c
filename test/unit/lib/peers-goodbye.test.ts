import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { decode, encode } from '../../../bus/codec.js';
import type { Heartbeat, ProcessInfo, WireWindow } from '../../../bus/subjects.js';
import { KeyPair } from '../../../bus/seal.js';
import { Peers } from '../../../lib/runtime/peers.js';
import { until } from '../../helpers/wait.js';

// A process that stops says goodbye (a last signed heartbeat saying `leaving`), so its peers act on
// its end at once instead of after the death bound: an edge hands the events a stopped callback
// replica left undelivered to another one (issue #40). Only when every live process reads it.
const CURRENT: WireWindow = { speaks: 2, oldest: 1 };
const info = (id: string, roles: string[], wire: WireWindow | null): ProcessInfo => ({ id, busId: randomBytes(6).toString('hex'), roles, pid: 1, host: 'h', startedAt: '', ...(wire ? { wire } : {}) });
/** A death bound no test waits out: an end seen within it was said, not timed. */
const DEAD_MS = 60_000;

function peersOf(bus: MemoryBus, id: string, roles: string[], wire?: WireWindow | null, refused: string[] = []) {
  const p = new Peers(bus, info(id, roles, wire === undefined ? CURRENT : wire), { intervalMs: 50, deadAfterMs: DEAD_MS, key: KeyPair.generate().publicKey, onRefused: (w) => refused.push(w) });
  p.start();
  return p;
}

test('a stopping process says goodbye: its peers see it gone at once and run their death listeners once', async (t) => {
  const bus = new MemoryBus();
  const edge = peersOf(bus, 'edge-1', ['edge']);
  const callback = peersOf(bus, 'callback-1', ['callback']);
  t.teardown(() => edge.stop());
  await until('the edge hears the callback replica', () => edge.alive('callback').length === 1);
  const deaths: string[] = [];
  edge.onDeath((p) => deaths.push(`${p.roles.join(',')} ${p.id}`));
  callback.stop();
  await until('the goodbye acted on', () => deaths.length > 0, 5_000);
  t.deepEqual(deaths, ['callback callback-1']);
  t.deepEqual(edge.alive('callback'), []);
});

test('no goodbye while a live process of an earlier release (no wire format 2) would find its signature bad', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const old = peersOf(bus, 'old-edge', ['edge'], null, refused); // says no wire: format 1 only
  const callback = peersOf(bus, 'callback-1', ['callback']);
  t.teardown(() => old.stop());
  await until('the callback replica hears the old edge', () => callback.alive('edge').length === 1);
  const sent: Heartbeat[] = [];
  bus.subscribe('pier.process.heartbeat.callback', (m) => sent.push(decode(m.data) as Heartbeat));
  callback.stop();
  await bus.flush();
  t.false(sent.some((b) => b.leaving === true), 'a leaving heartbeat was sent to a wire-1 process');
  t.deepEqual(refused, []);
  t.is(old.alive('callback').length, 1, 'the old edge still counts it until the death bound, as before');
});

test('hostile: a goodbye not signed by the process (a thief of the role identity ending a live replica) is refused; a replay after a real goodbye does not bring it back', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const edge = peersOf(bus, 'edge-1', ['edge'], undefined, refused);
  const callback = peersOf(bus, 'callback-1', ['callback']);
  t.teardown(() => edge.stop());
  const beats: Heartbeat[] = [];
  bus.subscribe('pier.process.heartbeat.callback', (m) => beats.push(decode(m.data) as Heartbeat));
  await until('two heartbeats of the callback replica', () => beats.length >= 2 && edge.alive('callback').length === 1);
  const deaths: string[] = [];
  edge.onDeath((p) => deaths.push(p.id));

  // A copy of a real heartbeat, counted up and marked leaving: the signature does not cover it.
  const real = beats[beats.length - 1];
  bus.publish('pier.process.heartbeat.callback', encode({ ...real, seq: real.seq + 1000, leaving: true }));
  await until('the forged goodbye refused', () => refused.some((r) => /bad signature/.test(r)));
  t.deepEqual(deaths, []);
  t.is(edge.alive('callback').length, 1);

  callback.stop();
  await until('the real goodbye acted on', () => deaths.length === 1);
  const before = refused.length;
  bus.publish('pier.process.heartbeat.callback', encode(real)); // an older heartbeat of the process that left
  await until('the replay refused', () => refused.length > before);
  t.regex(refused[refused.length - 1], /replayed/);
  t.deepEqual(edge.alive('callback'), []);
  t.deepEqual(deaths, ['callback-1']);
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { FIRST_WIRE, wireOverlaps, type ProcessInfo, type WireWindow } from '../../../bus/subjects.js';
import { KeyPair } from '../../../bus/seal.js';
import { Peers } from '../../../lib/runtime/peers.js';
import { until } from '../../helpers/wait.js';

// docs/operations.md "Upgrading": release N speaks N and N−1. A process two releases apart shares no
// wire format: it is named at once (a log line, `pier status`, the admin's /readyz) and nothing is
// routed to it; nobody waits for it to time out.

const info = (id: string, roles: string[], wire?: WireWindow): ProcessInfo => ({ id, busId: randomBytes(6).toString('hex'), roles, pid: 1, host: 'h', startedAt: '', ...(wire ? { wire } : {}) });

test('windows: N talks with N−1 both ways, not with N−2; a process that does not say speaks the first format', (t) => {
  const release = (n: number): WireWindow => ({ speaks: n, oldest: Math.max(1, n - 1) });
  t.true(wireOverlaps(release(3), release(2)));
  t.true(wireOverlaps(release(2), release(3)));
  t.false(wireOverlaps(release(4), release(2)));
  t.false(wireOverlaps(release(2), release(4)));
  t.true(wireOverlaps(FIRST_WIRE, release(2)));
  t.false(wireOverlaps(FIRST_WIRE, release(3)));
});

test('a process two releases apart is named at once by its heartbeat, and left out of the live processes', async (t) => {
  const bus = new MemoryBus();
  const mismatches: string[] = [];
  const opts = { intervalMs: 50, deadAfterMs: 5_000 };
  const admin = new Peers(bus, info('admin-1', ['admin'], { speaks: 3, oldest: 2 }), { ...opts, key: KeyPair.generate().publicKey, onMismatch: (p, role) => mismatches.push(`${role} ${p.id} ${p.version ?? '?'}`) });
  const next = new Peers(bus, info('vault-next', ['vault'], { speaks: 4, oldest: 3 }), { ...opts, key: KeyPair.generate().publicKey });
  const far = new Peers(bus, { ...info('vault-far', ['vault'], { speaks: 5, oldest: 4 }), version: '0.5.0' }, { ...opts, key: KeyPair.generate().publicKey });
  for (const p of [admin, next, far]) p.start();
  t.teardown(() => [admin, next, far].forEach((p) => p.stop()));
  await until('the far vault named as outside the window', () => admin.mismatched().length === 1);
  t.deepEqual(admin.mismatched().map((p) => [p.id, p.roles, p.wire]), [['vault-far', ['vault'], { speaks: 5, oldest: 4 }]]);
  t.deepEqual(admin.alive('vault').map((p) => p.id), ['vault-next'], 'routing sees only the vault it shares a format with');
  await bus.flush();
  t.deepEqual(mismatches, ['vault vault-far 0.5.0'], 'said once, by name, whatever the heartbeats that follow');
});

test('hostile: the wire window is signed with the heartbeat: a copy claiming another window is not believed', async (t) => {
  const bus = new MemoryBus();
  const refused: string[] = [];
  const watcher = new Peers(bus, info('watcher', ['admin'], { speaks: 2, oldest: 1 }), { intervalMs: 60_000, deadAfterMs: 60_000, key: KeyPair.generate().publicKey, onRefused: (w) => refused.push(w) });
  watcher.start();
  t.teardown(() => watcher.stop());
  // A bus member rewrites a real edge's heartbeat to make it look two releases ahead (and so be shunned).
  const edge = new Peers(bus, info('edge-1', ['edge'], { speaks: 2, oldest: 1 }), { intervalMs: 60_000, deadAfterMs: 60_000, key: KeyPair.generate().publicKey });
  const { encode, decode } = await import('../../../bus/codec.js');
  const original = bus.publish.bind(bus);
  bus.publish = (subject: string, data: Uint8Array, opts?: Parameters<MemoryBus['publish']>[2]) => {
    if (subject === 'pier.process.heartbeat.edge') {
      const beat = decode<Record<string, unknown>>(data);
      return original(subject, encode({ ...beat, wire: { speaks: 9, oldest: 9 } }), opts);
    }
    return original(subject, data, opts);
  };
  edge.start();
  t.teardown(() => edge.stop());
  await until('the rewritten heartbeat refused', () => refused.some((r) => /edge process edge-1 with a bad signature/.test(r)));
  t.deepEqual(watcher.mismatched(), []);
});

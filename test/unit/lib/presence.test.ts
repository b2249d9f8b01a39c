import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import type { ProcessInfo } from '../../../bus/subjects.js';
import type { Metrics } from '../../../lib/runtime/metrics.js';
import { announceProcess, describeProcesses } from '../../../lib/runtime/presence.js';
import { patience } from '../../helpers/time.js';

const info = (id: string, roles: string[]): ProcessInfo => ({ id, busId: id, roles, pid: 1, host: 'h', startedAt: '' });

/** A process whose metrics take `delayMs` to collect (a loaded host), or are collected only once `delayMs` settles. */
function process(bus: MemoryBus, p: ProcessInfo, delayMs: number | Promise<void>) {
  const collected = () => (typeof delayMs === 'number' ? new Promise((r) => setTimeout(() => r([]), delayMs)) : delayMs.then(() => []));
  const metrics = { registry: { getMetricsAsJSON: collected } } as unknown as Metrics;
  return announceProcess(bus, p, metrics, () => ({}), { sign: () => 'sig' });
}

const processes = [info('edge-1', ['edge']), info('vault-1', ['vault']), info('slow-1', ['registry'])];

test('status waits for every process the heartbeats count live, a slow one too (pier status listed fewer roles than it said ran)', async (t) => {
  const bus = new MemoryBus();
  // Slower than the stall, within the deadline a live count gives (5 stalls): waited for.
  const stall = patience(400);
  const subs = processes.map((p) => process(bus, p, p.id === 'slow-1' ? 3 * stall : 0));
  t.teardown(() => subs.forEach((s) => s.unsubscribe()));
  const peers = { signedBy: () => true, alive: (role: string) => processes.filter((p) => p.roles.includes(role)) };
  const reports = await describeProcesses(bus, stall, peers);
  t.deepEqual(reports.map((r) => r.info.id).sort(), ['edge-1', 'slow-1', 'vault-1']);
});

test('with no heartbeat heard yet, answers are waited for until they stall: a late one is cut, and an unsigned one never counts', async (t) => {
  const bus = new MemoryBus();
  // The late one answers only once the status is given: cut for certain, however busy the machine.
  let answerLate!: () => void;
  const late = new Promise<void>((r) => (answerLate = r));
  const subs = processes.map((p) => process(bus, p, p.id === 'slow-1' ? late : 0));
  t.teardown(() => {
    answerLate();
    subs.forEach((s) => s.unsubscribe());
  });
  const reports = await describeProcesses(bus, patience(1_000), { signedBy: (id: string) => id !== 'vault-1', alive: () => [] });
  t.deepEqual(reports.map((r) => r.info.id).sort(), ['edge-1']);
});

test('a process that answers but is not counted live yet (just started) does not push a live one out: both are kept', async (t) => {
  const bus = new MemoryBus();
  const all = [...processes, info('new-1', ['edge'])];
  const subs = all.map((p) => process(bus, p, p.id === 'slow-1' ? 400 : 0));
  t.teardown(() => subs.forEach((s) => s.unsubscribe()));
  // The heartbeats count three; four answer, the slowest of the counted ones last.
  const peers = { signedBy: () => true, alive: (role: string) => processes.filter((p) => p.roles.includes(role)) };
  const reports = await describeProcesses(bus, 100, peers);
  t.deepEqual(reports.map((r) => r.info.id).sort(), ['edge-1', 'new-1', 'slow-1', 'vault-1']);
});

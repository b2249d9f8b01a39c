import test from 'ava';
import { checkProcesses } from '../../../chaos/checks/processes.js';
import type { History, HistoryLine } from '../../../chaos/history.js';
import { restartProcess } from '../../../chaos/faults.js';
import type { ChaosProcess } from '../../../chaos/processes.js';

// The processes checker on hand-made histories: what it must flag, and what it must let pass.
const line = (n: number, fields: Record<string, unknown>): HistoryLine => ({ t: n * 1_000, n, phase: 'info', id: `l${n}`, ...fields }) as unknown as HistoryLine;

test('a restart that did not become ready in time is an anomaly, even when a later try worked', (t) => {
  const verdicts = checkProcesses([
    line(1, { kind: 'fault', op: 'kill -9', target: 'upload-2' }),
    line(2, { kind: 'fault', op: 'restart failed', target: 'upload-2', attempt: 1, error: 'upload-2 did not become ready in 60000 ms' }),
    line(3, { kind: 'fault', op: 'healed', target: 'upload-2', fault: 'kill -9' }),
  ]);
  const ready = verdicts.find((v) => v.check.startsWith('every restarted process'))!;
  t.is(ready.checked, 1);
  t.deepEqual(ready.anomalies, ['upload-2: restart 1 failed: upload-2 did not become ready in 60000 ms']);
});

test('restarts that came up, and no exits, pass', (t) => {
  const verdicts = checkProcesses([line(1, { kind: 'fault', op: 'kill -9', target: 'vault-1' }), line(2, { kind: 'fault', op: 'healed', target: 'vault-1', fault: 'kill -9' })]);
  for (const v of verdicts) t.deepEqual(v.anomalies, [], v.check);
});

test('an exit the injector did not cause is an anomaly', (t) => {
  const verdicts = checkProcesses([line(1, { kind: 'process', op: 'exited', target: 'edge-1', code: 1 })]);
  t.deepEqual(verdicts.find((v) => v.check.startsWith('no process exited'))!.anomalies, ['edge-1 exited (1)']);
});

test('a fault lane that failed (a power cut refused, say) fails the run, naming the lane and why', (t) => {
  const verdicts = checkProcesses([
    line(1, { kind: 'fault', op: 'power cut', target: 'every node' }),
    line(2, { kind: 'fault', op: 'lane failed', target: 'power', error: 'Error: lossyfs: cut refused: 1 file(s) still open on the mount after 20000 ms (/x/f)' }),
  ]);
  const lanes = verdicts.find((v) => v.check.startsWith('the fault injector ran every lane'))!;
  t.is(lanes.anomalies.length, 1);
  t.regex(lanes.anomalies[0], /^the power lane failed: .*cut refused/);
});

test('a history without faults (a rolling upgrade, a run with --no-faults) has no lane verdict to pass for want of operations', (t) => {
  const verdicts = checkProcesses([line(1, { kind: 'process', op: 'rss', target: 'edge-1', kib: 1, pid: 1 })]);
  t.false(verdicts.some((v) => v.check.startsWith('the fault injector ran every lane')));
});

test('a restart whose first try gave up (NATS without quorum for its state) and whose next was ready within 60 s of the first is no outage: it is counted apart', (t) => {
  const verdicts = checkProcesses([
    line(1, { kind: 'fault', op: 'kill -9', target: 'vault-2' }),
    line(31, { kind: 'fault', op: 'restart try failed', target: 'vault-2', attempt: 1, error: 'vault-2 exited (1) before ready: {"msg":"starting: still waiting"}\npier: TIMEOUT: TIMEOUT\n' }),
    line(36, { kind: 'fault', op: 'restart retried', target: 'vault-2', attempts: 2, readyAfterMs: 35_000 }),
    line(36, { kind: 'fault', op: 'healed', target: 'vault-2', fault: 'kill -9' }),
  ]);
  for (const v of verdicts) t.deepEqual(v.anomalies, [], v.check);
  const info = verdicts.find((v) => v.check.startsWith('(info) restarts ready in time'))!;
  t.is(info.checked, 1);
  t.true(info.check.includes('vault-2 (2 tries, 35000 ms)') && info.check.includes('pier: TIMEOUT: TIMEOUT'), info.check);
});

test('restartProcess: a try that fails is tried again; ready within 60 s of the first try is "retried", never "failed"', async (t) => {
  const lines: Array<{ op: string; fields: Record<string, unknown> }> = [];
  const history = { info: (_kind: string, op: string, fields: Record<string, unknown>) => lines.push({ op, fields }) } as unknown as History;
  let tries = 0;
  const p = { name: 'vault-2', start: async () => {
    if (++tries === 1) throw new Error(`vault-2 exited (1) before ready: ${'x'.repeat(2_000)}\npier: TIMEOUT: TIMEOUT`);
  } } as unknown as ChaosProcess;
  await restartProcess(history, p);
  t.is(tries, 2);
  t.deepEqual(lines.map((l) => l.op), ['restart try failed', 'restart retried']);
  const error = String(lines[0]!.fields.error);
  t.true(error.startsWith('vault-2 exited (1) before ready') && error.endsWith('pier: TIMEOUT: TIMEOUT') && error.length < 1_000, 'the head and the tail of a long failure are kept');
});

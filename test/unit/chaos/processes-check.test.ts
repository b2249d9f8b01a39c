import test from 'ava';
import { checkProcesses } from '../../../chaos/checks/processes.js';
import type { HistoryLine } from '../../../chaos/history.js';

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

import test from 'ava';
import { checkValueKeys } from '../../../chaos/checks/value-keys.js';
import type { HistoryLine } from '../../../chaos/history.js';

// The upgrade checker of the vault's value keys (chaos/checks/value-keys.ts): none written while a
// vault replica of the old build lives, some once only this build's run.

let n = 0;
const line = (t: number, kind: string, op: string, fields: Record<string, unknown> = {}): HistoryLine => ({ t, n: n++, kind, phase: 'info', op, id: '', ...fields }) as HistoryLine;
const sample = (t: number, build: string, written: number) => line(t, 'vault', 'value keys', { build, written });
const step = (t: number, no: number, roll: string, target: string, readyAfter: number) => [
  line(t, 'upgrade', 'step', { step: no, roll, target, roles: 'vault', from: roll === 'upgrade' ? 'old' : 'new', to: roll === 'upgrade' ? 'new' : 'old' }),
  line(t + readyAfter, 'upgrade', 'ready', { step: no, readyMs: readyAfter }),
];

/** Two vault replicas upgraded at 10 s and 20 s, rolled back at 40 s and 50 s; `written` per sample time. */
function run(written: (t: number) => number): HistoryLine[] {
  const build = (t: number) => (t < 10_000 ? 'old' : t < 30_000 ? (t < 22_000 ? 'upgrading' : 'new') : t < 40_000 ? 'new' : t < 52_000 ? 'rolling back' : 'old again');
  const lines = [line(0, 'run', 'start'), ...step(10_000, 1, 'upgrade', 'vault-1', 1_000), ...step(20_000, 2, 'upgrade', 'vault-2', 1_000), ...step(40_000, 3, 'rollback', 'vault-1', 1_000), ...step(50_000, 4, 'rollback', 'vault-2', 1_000)];
  for (let t = 2_000; t <= 60_000; t += 2_000) lines.push(sample(t, build(t), written(t)));
  return lines.sort((a, b) => a.t - b.t);
}

test('keys written only while every vault ran this build: both hold', (t) => {
  const verdicts = checkValueKeys(run((t) => (t <= 22_000 ? 0 : t <= 40_000 ? (t - 22_000) / 2_000 : 9)));
  t.deepEqual(verdicts.map((v) => v.anomalies), [[], []]);
  t.regex(verdicts[0].check, /none written while a vault replica of the old build lived/);
});

test('a key written while a replica of the old build lived (rolled back at 41 s) is named', (t) => {
  const verdicts = checkValueKeys(run((t) => (t <= 22_000 ? 0 : t <= 46_000 ? (t - 22_000) / 2_000 : 12)));
  t.is(verdicts[0].anomalies.length, 1);
  t.regex(verdicts[0].anomalies[0], /while vault-1 ran the old build/);
});

test('a writer whose gate never opened fails the second; an old build that writes keys itself is not judged', (t) => {
  t.deepEqual(checkValueKeys(run(() => 0))[1].anomalies, ['no value key was written in the phase on this build alone']);
  const verdicts = checkValueKeys(run((t) => t / 2_000));
  t.regex(verdicts[0].check, /not judged/);
  t.deepEqual(verdicts[0].anomalies, []);
});

test('no samples (an old build without the bucket, and a new one that never made it): nothing judged', (t) => {
  t.deepEqual(checkValueKeys([line(0, 'run', 'start')]), []);
});

import test from 'ava';
import type { HistoryLine } from '../../../chaos/history.js';
import { excuseOldReleaseRaces } from '../../../chaos/checks/old-release.js';
import { checkVault } from '../../../chaos/checks/vault.js';

// The upgrade run reads the previous release's known undelete race (a 404 that had restored the
// secret: seeds 7278, 7279) as an unknown outcome, only where no vault process ran this build for
// the whole of the request (chaos/checks/old-release.ts). Times in seconds.

/** A vault request's two lines: invoked at `from`, answered at `to` (200 ok, 4xx fail). */
function vault(id: string, op: string, key: string, from: number, to: number, status = 200, extra: Record<string, unknown> = {}): HistoryLine[] {
  const invoke = { t: from * 1_000, n: from * 10, kind: 'vault', op, id, phase: 'invoke', key, ...extra };
  const outcome = { t: to * 1_000, n: to * 10, kind: 'vault', op, id, phase: status === 200 ? 'ok' : 'fail', status, ...(status === 200 ? {} : { message: `no deleted secret "${key}"` }) };
  return [invoke, outcome] as unknown as HistoryLine[];
}

/** Vault process `target` replaced by this build at `up` (ready 2 s later) and rolled back at `back`. */
function vaultSteps(target: string, up: number, back: number, step: number): HistoryLine[] {
  const line = (t: number, op: string, s: number, roll: string, more: Record<string, unknown> = {}) => ({ t: t * 1_000, n: t * 10, kind: 'upgrade', phase: 'info', op, id: `step-${s}-${op}`, step: s, target, roles: 'vault', roll, ...more });
  return [
    line(up, 'step', step, 'upgrade', { from: 'old', to: 'this' }),
    line(up + 2, 'ready', step, 'upgrade', { readyMs: 2_000 }),
    line(up + 3, 'step end', step, 'upgrade'),
    line(back, 'step', step + 10, 'rollback', { from: 'this', to: 'old' }),
    line(back + 2, 'ready', step + 10, 'rollback', { readyMs: 2_000 }),
    line(back + 3, 'step end', step + 10, 'rollback'),
  ] as unknown as HistoryLine[];
}

// Two vault replicas: this build ran on one from 100 to 302, on the other from 110 to 312.
const steps = [...vaultSteps('vault-1', 100, 300, 1), ...vaultSteps('vault-2', 110, 310, 2)];
const raced = (from: number, to: number) => [...vault('u1', 'undelete', 'k01', from, to, 404), ...vault('d1', 'delete', 'k01', from, to)];

test('an undelete answered 404 racing a delete, while only the previous release ran the vault, is read as unknown', (t) => {
  for (const at of [20, 400]) {
    const { lines, excused } = excuseOldReleaseRaces([...steps, ...raced(at, at + 1)]);
    t.is(excused.length, 1, `at ${at}`);
    t.is(lines.find((l) => l.id === 'u1' && l.phase !== 'invoke')!.phase, 'unknown', `at ${at}`);
  }
});

test('hostile: no excuse where this build may have answered, for other races, answers or ops', (t) => {
  const cases: Array<[string, HistoryLine[]]> = [
    ['this build on one replica', raced(200, 201)],
    ['overlapping the first upgrade step', raced(99, 101)],
    ['overlapping the last rollback until ready', raced(311, 313)],
    ['no delete or destroy of the key at once', [...vault('u1', 'undelete', 'k01', 20, 21, 404), ...vault('d1', 'delete', 'k01', 22, 23)]],
    ['a delete of another key', [...vault('u1', 'undelete', 'k01', 20, 21, 404), ...vault('d1', 'delete', 'k02', 20, 21)]],
    ['racing an update, not a delete', [...vault('u1', 'undelete', 'k01', 20, 21, 404), ...vault('d1', 'update', 'k01', 20, 21)]],
    ['a 409, not the 404', [...vault('u1', 'undelete', 'k01', 20, 21, 409), ...vault('d1', 'delete', 'k01', 20, 21)]],
    ['a delete answered 404, not an undelete', [...vault('u1', 'delete', 'k01', 20, 21, 404), ...vault('d1', 'destroy', 'k01', 20, 21)]],
  ];
  for (const [what, requests] of cases) {
    const { lines, excused } = excuseOldReleaseRaces([...steps, ...requests]);
    t.deepEqual(excused, [], what);
    t.false(lines.some((l) => l.phase === 'unknown'), what);
  }
  // A history with no upgrade step (a chaos run), or none of a vault process, is left as it is.
  t.deepEqual(excuseOldReleaseRaces(raced(20, 21)).excused, []);
  const edgeOnly = steps.map((l) => ({ ...l, roles: 'edge', target: String(l.target).replace('vault', 'edge') }));
  t.deepEqual(excuseOldReleaseRaces([...edgeOnly, ...raced(20, 21)]).excused, []);
});

test('the vault check stops flagging a delete of the secret the excused undelete restored, and only then', (t) => {
  // As in 7279: create, delete (acknowledged), an undelete racing a second delete answers 404 but
  // had restored the secret, so the second delete finds it and is acknowledged.
  const history = [
    ...steps,
    ...vault('c1', 'create', 'k07', 10, 11, 200, { value: 'k07=1' }),
    ...vault('d0', 'delete', 'k07', 12, 13),
    ...vault('u1', 'undelete', 'k07', 14, 16, 404),
    ...vault('d1', 'delete', 'k07', 15, 17),
    ...vault('r1', 'read', 'k07', 20, 21, 200, { final: true }),
  ];
  (history.at(-1) as Record<string, unknown>).absent = true;
  const preconditions = (lines: readonly HistoryLine[]) => checkVault(lines).find((v) => v.check.startsWith('vault: creates succeed only on absent keys'))!;
  t.is(preconditions(history).anomalies.length, 1, 'as answered, the second delete hits an absent secret');
  t.deepEqual(preconditions(excuseOldReleaseRaces(history).lines).anomalies, []);
});

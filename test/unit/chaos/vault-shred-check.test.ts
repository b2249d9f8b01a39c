import test from 'ava';
import type { HistoryLine } from '../../../chaos/history.js';
import { destroyedValues } from '../../../chaos/vault-shred.js';
import { checkVault } from '../../../chaos/checks/vault.js';

// The settle's reading of destroyed values (chaos/vault-shred.ts): which values are destroyed for
// good, from the history, and how its line is judged (chaos/checks/vault.ts).

let n = 0;
const at = (phase: string, op: string, id: string, fields: Record<string, unknown> = {}): HistoryLine => ({ t: n, n: n++, kind: 'vault', phase, op, id, ...fields }) as HistoryLine;
const write = (id: string, op: string, key: string, value: string, version: number, outcome = 'ok') => [at('invoke', op, id, { key, value }), at(outcome, op, id, outcome === 'ok' ? { version } : {})];

test('a destroyed version\'s value counts (an undelete moves a value, it does not copy it); one a restore may have copied, or an unknown write blurs, does not', (t) => {
  const lines = [
    ...write('w1', 'create', 'k1', 'k1=1', 1),
    ...write('w2', 'update', 'k1', 'k1=2', 2),
    at('invoke', 'undelete', 'u1', { key: 'k1' }),
    at('ok', 'undelete', 'u1', { version: 2 }),
    at('invoke', 'destroy', 'd1', { key: 'k1', version: 1 }),
    at('ok', 'destroy', 'd1', { destroyed: [1] }),
    ...write('w3', 'create', 'k2', 'k2=1', 1),
    ...write('w4', 'update', 'k2', 'k2=2', 2),
    at('invoke', 'restore', 'r1', { key: 'k2', version: 1 }),
    at('unknown', 'restore', 'r1'),
    at('invoke', 'destroy', 'd2', { key: 'k2', version: 1 }),
    at('ok', 'destroy', 'd2', { destroyed: [1] }),
    ...write('w5', 'create', 'k3', 'k3=1', 1),
    ...write('w6', 'update', 'k3', 'k3=2', 2, 'unknown'),
    at('invoke', 'destroy', 'd3', { key: 'k3', version: 1 }),
    at('ok', 'destroy', 'd3', { destroyed: [1] }),
    at('invoke', 'read', 'f1', { key: 'k1', final: true }),
    at('ok', 'read', 'f1', { value: 'k1=2', version: 2 }),
  ];
  t.deepEqual(destroyedValues(lines), { destroyed: ['k1=1'], live: ['k1=2'] });
});

test('the shred line: a destroyed value under a value key, or a final value the reading missed, is an anomaly', (t) => {
  const base = [at('invoke', 'destroy', 'd', { key: 'k', version: 1 }), at('ok', 'destroy', 'd', { destroyed: [1] })];
  const shred = (fields: Record<string, unknown>) => checkVault([...base, { t: n, n: n++, kind: 'vault', phase: 'info', op: 'shred', id: '', ...fields } as HistoryLine]);
  const clean = shred({ destroyed: 1, underValueKeys: [], underDataKeys: 0, live: 1, liveUnopened: [], messages: 10 });
  t.deepEqual(clean.find((v) => v.check.startsWith('vault: no destroyed value under a value key'))?.anomalies, []);
  const leaked = shred({ destroyed: 1, underValueKeys: ['k=1'], underDataKeys: 0, live: 1, liveUnopened: ['k=2'], messages: 10 });
  t.is(leaked.find((v) => v.check.startsWith('vault: no destroyed value under a value key'))?.anomalies.length, 2);
  const failed = shred({ error: 'no responders' });
  t.regex(failed.find((v) => v.check.startsWith('vault: no destroyed value'))!.anomalies[0], /could not be read: no responders/);
});

import test from 'ava';
import type { HistoryLine } from '../../../chaos/history.js';
import { checkUpgrade } from '../../../chaos/checks/upgrade.js';
import { contended, readRequests, rolesOf, type Request } from '../../../chaos/checks/upgrade-history.js';

// The upgrade checker (chaos/checks/upgrade-history.ts) excuses a failed request only while a role
// it passes through is replaced. Every request through an edge needs the edge's registry view
// fresh (docs/operations.md), so with one registry replica its replacement may fail any of them.
const request = (kind: string, op: string): Request => ({ kind, op, id: `${kind}-1`, invokedAt: 0, endedAt: 1, outcome: 'unknown', status: 503 });

test('every request through an edge passes through the registry too', (t) => {
  for (const [kind, op] of [['vault', 'read'], ['carry', 'create'], ['upload', 'patch'], ['ws', 'connect'], ['users', 'probe'], ['users', 'access probe'], ['users', 'access'], ['users', 'old key']]) {
    const roles = rolesOf(request(kind, op));
    t.true(roles.includes('edge'), `${kind} ${op}: ${roles.join(',')}`);
    t.true(roles.includes('registry'), `${kind} ${op}: ${roles.join(',')}`);
  }
  t.deepEqual(rolesOf(request('users', 'install')), ['admin', 'registry']);
  // The operator's undelete and destroy reach the vault through the admin API (an upgrade run from
  // 0.3.0 failed two undeletes answered 503 while the admin was replaced, as not passing through it).
  for (const op of ['undelete', 'destroy']) t.deepEqual(rolesOf(request('vault', op)), ['admin', 'vault', 'registry']);
});

/** A vault request's two history lines: invoked at `from` (s), answered at `to` with `status` (200: ok). */
function vaultRequest(id: string, op: string, key: string, from: number, to: number, status: number): HistoryLine[] {
  const invoke = { t: from * 1_000, n: from, kind: 'vault', op, id, phase: 'invoke', key };
  const outcome = { t: to * 1_000, n: to, kind: 'vault', op, id, phase: status === 200 ? 'ok' : 'unknown', status };
  return [invoke, outcome] as unknown as HistoryLine[];
}

const placement = (lines: HistoryLine[]) => checkUpgrade(lines).find((v) => v.check.startsWith('upgrade: requests failed only while'))!;
const racesRow = (lines: HistoryLine[]) => checkUpgrade(lines).find((v) => v.check.includes('racing another write of the same secret'))!;

test('a vault write answered 503 racing another write of one secret is the vault answering a race, not a failure of the upgrade', (t) => {
  // Upgrade runs from 0.3.0: a delete of k07 answered 503 between an undelete and another delete of
  // k07 (7262); an undelete of k11 answered 503 racing one delete of k11, which had built on what the
  // undelete committed (7273). Neither at a step of its roles.
  const three = [...vaultRequest('d1', 'delete', 'k07', 10, 12, 503), ...vaultRequest('u1', 'undelete', 'k07', 10, 11, 200), ...vaultRequest('d2', 'delete', 'k07', 11, 13, 200)];
  const two = [...vaultRequest('u1', 'undelete', 'k11', 10, 12, 503), ...vaultRequest('d1', 'delete', 'k11', 10, 12, 200)];
  for (const lines of [three, two]) {
    t.deepEqual(placement(lines).anomalies, []);
    t.is(racesRow(lines).checked, 1);
    t.true(contended(readRequests(lines).find((r) => r.status === 503)!, readRequests(lines)));
  }
});

test('hostile: a 503 the race does not explain is still a failure (alone, another key, a read, apart in time, a 500)', (t) => {
  const cases: Array<[string, HistoryLine[]]> = [
    ['no other write of the key', [...vaultRequest('d1', 'delete', 'k07', 10, 12, 503), ...vaultRequest('r1', 'read', 'k07', 10, 11, 200)]],
    ['the others write another secret', [...vaultRequest('d1', 'delete', 'k07', 10, 12, 503), ...vaultRequest('u1', 'undelete', 'k08', 10, 11, 200), ...vaultRequest('d2', 'delete', 'k09', 11, 13, 200)]],
    ['a read, not a write', [...vaultRequest('r1', 'read', 'k07', 10, 12, 503), ...vaultRequest('u1', 'undelete', 'k07', 10, 11, 200), ...vaultRequest('d2', 'delete', 'k07', 11, 13, 200)]],
    ['the others before and after it', [...vaultRequest('d1', 'delete', 'k07', 10, 12, 503), ...vaultRequest('u1', 'undelete', 'k07', 5, 9, 200), ...vaultRequest('d2', 'delete', 'k07', 13, 14, 200)]],
    ['a 500, not the 503', [...vaultRequest('d1', 'delete', 'k07', 10, 12, 500), ...vaultRequest('u1', 'undelete', 'k07', 10, 11, 200), ...vaultRequest('d2', 'delete', 'k07', 11, 13, 200)]],
  ];
  for (const [what, lines] of cases) {
    t.is(placement(lines).anomalies.length, 1, what);
    t.is(racesRow(lines).checked, 0, what);
  }
});

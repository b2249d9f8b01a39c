import test from 'ava';
import { rolesOf, type Request } from '../../../chaos/checks/upgrade-history.js';

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

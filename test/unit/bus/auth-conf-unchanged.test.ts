import test from 'ava';
import { readFileSync } from 'node:fs';
import { authorizationConf, planIdentities } from '../../../cli/bus-init.js';

// Issue 38 (one way to talk on the bus) changed how every role talks, not what it may do: the
// `auth.conf` that `pier bus init` writes is byte for byte the one of the release before it
// (fe419c0), the bcrypt hashes aside (their salts are random). A change to a role's rights must
// change this fixture on purpose, and say why in its commit.
const before = readFileSync(new URL('../../../../test/fixtures/auth.conf.before', import.meta.url), 'utf8');

test('the bus permissions derived from the actors\' declarations are the same as before the renovation', (t) => {
  const now = authorizationConf(planIdentities({ actors: ['token', 'vault'] }), 4).replace(/password: "[^"]*"/g, 'password: "<bcrypt>"');
  t.true(now.includes('pier.stream.edge.>'), 'the byte stream subjects are there');
  t.is(now, before);
});

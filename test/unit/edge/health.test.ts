import test from 'ava';
import type { Bus } from '../../../bus/bus.js';
import { BUS_ROLES } from '../../../bus/permissions.js';
import { healthz, missingRoles, readyz } from '../../../edge/http/health.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';

// The probes (docs/protocol.md "Conventions"): /healthz says the process answers; /readyz names every reason
// it is not ready, the admin listener's also the roles no process runs.

const bus = (connected: boolean) => ({ isConnected: () => connected }) as unknown as Bus;
const cache = (fresh: boolean) => ({ isFresh: () => fresh }) as unknown as RegistryCache;
const peers = (running: readonly string[], mismatched: unknown[] = []) => ({ alive: (role: string) => (running.includes(role) ? [{ id: `${role}-1` }] : []), mismatched: () => mismatched }) as never;

test('/healthz answers 200 whatever the bus', (t) => {
  t.deepEqual(healthz(), { status: 200, json: { code: 0, message: 'ok' } });
});

test('/readyz is 200 with the bus connected and the registry heard', (t) => {
  t.deepEqual(readyz(bus(true), cache(true)), { status: 200, json: { code: 0, message: 'ready' } });
  t.deepEqual(readyz(bus(true), cache(true), peers(BUS_ROLES)), { status: 200, json: { code: 0, message: 'ready' } });
});

test('/readyz is 503 naming each problem', (t) => {
  t.deepEqual(readyz(bus(false), cache(false)), { status: 503, json: { code: 503, message: 'not ready: bus disconnected, registry not reachable' } });
  t.deepEqual(readyz(bus(true), cache(true), peers(BUS_ROLES.filter((r) => r !== 'vault'))), { status: 503, json: { code: 503, message: 'not ready: no vault replica is running' } });
});

test("the admin's /readyz names a process outside the wire window (a rolling upgrade that skipped a release)", (t) => {
  const far = { id: 'vault-far', roles: ['vault'], version: '0.5.0', wire: { speaks: 5, oldest: 4 } };
  t.deepEqual(readyz(bus(true), cache(true), peers(BUS_ROLES, [far])), { status: 503, json: { code: 503, message: 'not ready: vault process vault-far (Pier 0.5.0) shares no wire format with this admin' } });
});

test('missing roles are those without a live process, in the order of the role table', (t) => {
  t.deepEqual(missingRoles(peers(BUS_ROLES)), []);
  t.deepEqual(missingRoles(peers(['edge'])), BUS_ROLES.filter((r) => r !== 'edge'));
});

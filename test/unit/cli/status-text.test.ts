import test from 'ava';
import { COMMANDS } from '../../../cli/commands.js';

// docs/operations.md "Upgrading": what `pier status` shows while processes of two releases run.
type Status = Parameters<NonNullable<(typeof COMMANDS)['status']['text']>>[0];
const statusText = (d: Status) => COMMANDS.status.text!(d);

const replica = (id: string, version: string | undefined, wire = { speaks: 2, oldest: 1 }) => ({ id, busId: id, roles: ['vault'], pid: 1, host: 'h', startedAt: '2026-11-27T00:00:00.000Z', ...(version ? { version } : {}), wire, counters: {} });
const status = (replicas: ReturnType<typeof replica>[], mismatched: Status['mismatched'] = []): Status =>
  ({ bus: { kind: 'nats', connected: true }, roles: ['vault'], missingRoles: [], mismatched, wire: { speaks: 2, oldest: 1 }, registry: { revision: 1, fresh: true }, connections: 0, uploads: 0, replicas }) as unknown as Status;

test('one release running: no versions line; each process says its version and wire formats', (t) => {
  const text = statusText(status([replica('v1', '0.3.0'), replica('v2', '0.3.0')]));
  t.false(text.includes('versions:'));
  t.regex(text, /  v1  vault  Pier 0\.3\.0 \(wire 1-2\)  since /);
});

test('two releases running: a versions line counts each; a process two releases away is a MISMATCH line by name', (t) => {
  const text = statusText(
    status([replica('v1', '0.2.0', { speaks: 1, oldest: 1 }), replica('v2', '0.3.0'), replica('v3', '0.3.0')], [{ id: 'far', roles: ['vault'], version: '0.9.0', wire: { speaks: 9, oldest: 8 } }] as Status['mismatched']),
  );
  t.regex(text, /^versions: Pier 0\.2\.0 × 1, Pier 0\.3\.0 × 2 \(a rolling upgrade in progress, or one left half done\)$/m);
  t.regex(text, /^MISMATCH: vault process far \(Pier 0\.9\.0, wire 8-9\) shares no wire format with this admin \(wire 1-2\)/m);
});

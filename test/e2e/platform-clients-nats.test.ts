import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { BUS_ROLES } from '../../bus/permissions.js';
import { KEYRING_ROLES } from '../../lib/config/config.js';
import { pierEnv, PierProcess } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { platformClientsSuite } from './platform-clients-suite.js';

// The same clients against Pier as docs/security.md "The bus" runs it: one process per role, each with
// its own NATS identity (`pier bus init`), over TLS, on a nats-server that enforces every role's
// allow-lists. Every request crosses the bus; a subject a role did not declare would fail here.
// Only the roles that use them get the master key and the admin token; the others the bus anchors.
platformClientsSuite(test, async (dir) => {
  const bus = await SecureBus.start(dir);
  const adminToken = randomBytes(24).toString('hex');
  const masterKey = randomBytes(32).toString('hex');
  const start = (role: (typeof BUS_ROLES)[number], extra: Record<string, string> = {}) =>
    PierProcess.start(
      pierEnv(join(dir, role), {
        ...bus.envFor(role),
        PIER_HEARTBEAT_MS: '250',
        ...(KEYRING_ROLES.includes(role) ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
        ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
        ...extra,
      }),
      ['--roles', role],
    );
  const processes: PierProcess[] = [];
  for (const role of ['registry', 'token', 'provider', 'vault', 'callback', 'upload', 'edge'] as const) processes.push(await start(role));
  const edge = processes.at(-1)!;
  // The admin process hands apps the edge's system listener, as an operator sets it.
  const admin = await start('admin', { PIER_SYSTEM_URL: `127.0.0.1:${edge.ports!.system}` });
  processes.push(admin);
  return {
    ports: () => ({ ...edge.ports!, admin: admin.ports!.admin! }),
    cliEnv: () => ({ PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: admin.adminUrl }),
    stderr: () => processes.map((p) => p.stderr).join('\n'),
    stop: async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await bus.stop();
    },
  };
});

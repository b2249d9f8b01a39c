import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { NatsServer } from '../helpers/nats-server.js';
import { pierEnv, PierProcess } from '../helpers/pier.js';
import { platformClientsSuite } from './platform-clients-suite.js';

// The same clients against roles apart over a real nats-server: the actors, the upload writer and
// the edge in three processes, so every request crosses the bus.
platformClientsSuite(test, async (dir) => {
  const nats = await NatsServer.start();
  const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250', NATS_URL: nats.url };
  const start = (name: string, roles: string) => PierProcess.start(pierEnv(join(dir, name), shared), ['--roles', roles]);
  const processes = [await start('actors', 'registry,token,provider,vault,callback'), await start('upload', 'upload'), await start('edge', 'edge,admin')];
  const edge = processes[2];
  return {
    ports: () => edge.ports!,
    cliEnv: () => ({ ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl }),
    stderr: () => processes.map((p) => p.stderr).join('\n'),
    stop: async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await nats.stop();
    },
  };
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { NatsServer } from '../helpers/nats-server.js';
import { pierEnv, PierProcess } from '../helpers/pier.js';
import { suiteEnv, uploadSuite } from './upload-suite.js';

// The upload actor in its own process, apart from the edge and the registry, over a real nats-server.
uploadSuite(test, async (dir) => {
  const nats = await NatsServer.start();
  const shared = { ...suiteEnv(dir), PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250' };
  const start = (name: string, roles: string) => PierProcess.start(pierEnv(join(dir, name), { ...shared, NATS_URL: nats.url }), ['--roles', roles]);
  const registry = await start('registry', 'registry');
  let writer = await start('upload', 'upload');
  const edge = await start('edge', 'edge,admin');
  return {
    uploadPort: () => edge.ports!.upload,
    cliEnv: () => ({ ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl }),
    crashWriter: async () => {
      await writer.stop('SIGKILL');
    },
    restartWriter: async () => {
      writer = await start('upload', 'upload');
    },
    stop: async () => {
      if (edge.proc.exitCode !== null || edge.proc.signalCode !== null) process.stderr.write(`edge died: ${edge.stderr}\n`);
      await Promise.all([registry, writer, edge].map((p) => p.stop('SIGKILL')));
      await nats.stop();
    },
  };
});

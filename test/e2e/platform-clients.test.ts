import test from 'ava';
import { join } from 'node:path';
import { pierEnv, PierProcess } from '../helpers/pier.js';
import { platformClientsSuite } from './platform-clients-suite.js';

// Every role in one process on the in-process bus: `npm start` as an operator runs it.
platformClientsSuite(test, async (dir) => {
  const pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  return {
    ports: () => pier.ports!,
    cliEnv: () => ({ ...pier.env, PIER_ADMIN_URL: pier.adminUrl }),
    stderr: () => pier.stderr,
    stop: async () => {
      await pier.stop();
    },
  };
});

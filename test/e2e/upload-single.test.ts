import test from 'ava';
import { join } from 'node:path';
import { pierEnv, PierProcess } from '../helpers/pier.js';
import { suiteEnv, uploadSuite } from './upload-suite.js';

// The `npm start` shape: every role in one process. Its writer is the whole process.
uploadSuite(test, async (dir) => {
  let pier = await PierProcess.start(pierEnv(join(dir, 'data'), suiteEnv(dir)));
  return {
    uploadPort: () => pier.ports!.upload,
    cliEnv: () => ({ ...pier.env, PIER_ADMIN_URL: pier.adminUrl }),
    crashWriter: async () => {
      await pier.stop('SIGKILL');
    },
    // New ports: the old ones stay held for a minute by the killed process's connections (TIME_WAIT).
    restartWriter: async () => {
      pier = await PierProcess.start(pier.env);
    },
    stop: async () => {
      await pier.stop();
    },
  };
});

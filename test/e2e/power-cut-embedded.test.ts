import test from 'ava';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LossyFs } from '../helpers/lossy-fs.js';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { checkWorkload, writeWorkload } from '../helpers/power-cut-workload.js';
import { WsApp } from '../helpers/ws-app.js';

// The embedded default under a power cut (docs/operations.md "What an acknowledgement means"): one
// process, its data dir (master key, admin token, LMDB stores) and upload root on a layer that
// loses every write not fsynced and every name whose folder was not (powercut/README.md). Under
// registry, vault, gateway-history and upload writes (test/helpers/power-cut-workload.ts), the
// process is killed (-9) and the power cut; started again, it has every write it acknowledged.
// The cluster shape: power-cut-cluster.test.ts.
const maybe = LossyFs.testsHere('power-cut-embedded', test.serial, test.skip);

maybe('a power cut of the one process loses no acknowledged registry change, vault write, kept send or upload offset', async (t) => {
  t.timeout(180_000, 'two starts of Pier on the layer, the workload, the cut');
  const dir = tempDir('pier-power-');
  mkdirSync(join(dir, 'backing'));
  mkdirSync(join(dir, 'mnt'));
  const fs = await LossyFs.mount(join(dir, 'backing'), join(dir, 'mnt'));
  let app: WsApp | undefined;
  let pier: PierProcess | undefined;
  t.teardown(async () => {
    await pier?.stop('SIGKILL');
    await app?.stop();
    await fs.unmount().catch(() => undefined);
    cleanup(dir);
  });
  app = await WsApp.start();
  const data = join(dir, 'mnt', 'data');
  const root = join(dir, 'mnt', 'files');
  const start = () => PierProcess.start(pierEnv(data, { PIER_UPLOAD_ROOT: root }), [], 60_000);
  pier = await start();
  const on = { pier: () => pier!, root, dir, appPort: app.port };
  const acked = await writeWorkload(t, on);

  // The power goes out: the process dies with it, then everything not on disk is gone.
  await pier.stop('SIGKILL');
  const cut = await fs.cut();
  t.log(`power cut: ${cut.dropped} unsynced change(s) dropped, ${cut.kept} kept`);
  pier = await start();
  await checkWorkload(t, on, acked);
});

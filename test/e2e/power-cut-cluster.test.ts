import test from 'ava';
import { join } from 'node:path';
import { LossyFs } from '../helpers/lossy-fs.js';
import { PowerCutDisks } from '../helpers/power-cut-disks.js';
import { freeLoopbackPort, startJetStreamCluster, type NatsServer } from '../helpers/nats-server.js';
import { cleanup, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { checkWorkload, writeWorkload } from '../helpers/power-cut-workload.js';
import { patience } from '../helpers/time.js';
import { until } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';

// The cluster shape under a power cut of every node (docs/operations.md "What an acknowledgement
// means", issue #54): three NATS nodes with JetStream (each `sync_interval: always`, checked on its
// /varz) and one Pier process (every role, PIER_STATE=jetstream, three copies of each bucket and
// stream), on two layers that lose every write not fsynced (powercut/README.md). Under registry,
// vault, gateway-history and upload writes (test/helpers/power-cut-workload.ts, as in
// power-cut-embedded.test.ts), the process and the three nodes are killed (-9) at once and the power
// cut; the nodes and the process started again have every write Pier acknowledged.
//
// Pier's disk (its data dir, the upload root) keeps a new name only once its folder is fsynced, the
// rule POSIX gives and Pier keeps. The nodes' disk keeps names as a journaling filesystem (ext4, XFS)
// does (`journal`: a full fsync of anything commits every name change before it): nats-server 2.10
// never fsyncs a folder it makes, and under the strict rule every node's store is lost whole at the
// cut, `sync_interval: always` or not (powercut/README.md). With the nodes on nats-server's default
// sync (every 2 minutes) this test fails: the cluster comes back without a single stream.
const maybe = LossyFs.testsHere('power-cut-cluster', test.serial, test.skip);

const NODES = 3;

/** Whether the node whose monitoring endpoint is on `port` syncs JetStream before it acknowledges (its /varz). */
async function syncsAlways(port: number): Promise<boolean> {
  const varz = await until(`the monitoring endpoint on port ${port} to answer /varz`, async () => {
    const r = await fetch(`http://127.0.0.1:${port}/varz`);
    return r.status === 200 ? ((await r.json()) as { jetstream?: { config?: { sync_always?: boolean } } }) : undefined;
  });
  return varz.jetstream?.config?.sync_always === true;
}

maybe('a power cut of the three NATS nodes and the process loses no acknowledged registry change, vault write, kept send or upload offset', async (t) => {
  t.timeout(patience(180_000), 'a JetStream cluster and two starts of Pier on the layers, the workload, the cut');
  const dir = tempDir('pier-power-cluster-');
  let disks: PowerCutDisks | undefined;
  let nodes: NatsServer[] = [];
  let app: WsApp | undefined;
  let pier: PierProcess | undefined;
  t.teardown(async () => {
    await pier?.stop('SIGKILL');
    await Promise.all(nodes.map((n) => n.stop()));
    await app?.stop();
    await disks?.unmount().catch(() => undefined);
    cleanup(dir);
  });
  disks = await PowerCutDisks.mount(dir);
  const [pierDisk, natsDisk] = [disks.pierRoot, disks.natsRoot];

  // The nodes' stores on their disk (their configuration off it, as a real machine's was synced long ago).
  const monitors = await Promise.all(Array.from({ length: NODES }, () => freeLoopbackPort()));
  // (It waits until the fresh cluster places a stream of all three copies: nats-server.ts.)
  nodes = await startJetStreamCluster(dir, NODES, (i) => ['-m', String(monitors[i])], natsDisk);
  for (let i = 0; i < NODES; i++) t.true(await syncsAlways(monitors[i]!), `node ${i + 1} syncs before it acknowledges (sync_interval: always)`);
  app = await WsApp.start();
  const data = join(pierDisk, 'data');
  const root = join(pierDisk, 'files');
  const start = () =>
    PierProcess.start(
      pierEnv(data, { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: String(NODES), PIER_UPLOAD_ROOT: root, PIER_HEARTBEAT_MS: '250', PIER_NATS_MONITOR_URL: `http://127.0.0.1:${monitors[0]}` }),
      [],
      120_000,
    );
  pier = await start();
  const on = { pier: () => pier!, root, dir, appPort: app.port };
  const acked = await writeWorkload(t, on);

  // The power goes out: every node dies at once, then everything not on disk is gone.
  await Promise.all([pier.stop('SIGKILL'), ...nodes.map((n) => n.kill())]);
  const { pier: pierCut, nats: natsCut } = await disks.cut();
  t.log(`power cut: Pier's disk dropped ${pierCut.dropped} unsynced change(s) and kept ${pierCut.kept}; the nodes' disk dropped ${natsCut.dropped} and kept ${natsCut.kept}`);
  // The power comes back: the nodes recover their stores (all at once), then Pier starts.
  await Promise.all(nodes.map((n) => n.relaunch(patience(60_000))));
  for (let i = 0; i < NODES; i++) t.true(await syncsAlways(monitors[i]!), `node ${i + 1}, started again, syncs before it acknowledges`);
  pier = await start();
  await checkWorkload(t, on, acked);
});

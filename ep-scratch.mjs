import { mkdtempSync } from 'node:fs';
import { connect } from 'nats';
import { startJetStreamCluster } from '/work/main/dist/test/helpers/nats-server.js';
import { retryWhileStarting } from '/work/main/dist/lib/state/jetstream.js';
const nodes = await startJetStreamCluster(mkdtempSync('/tmp/epx-'), 3);
const nc = await connect({ servers: nodes.map(n=>n.url) });
const jsm = await retryWhileStarting(() => nc.jetstreamManager());
const cfg = { name: 'H', subjects: ['h.>'], num_replicas: 3, max_msgs_per_subject: 100 };
await jsm.streams.add(cfg);
const js = nc.jetstream();
const show = async (tag) => { const i = await retryWhileStarting(() => jsm.streams.info('H')); console.log(tag, i.created, i.cluster.leader); };
await show('start');
for (let r = 0; r < 6; r++) {
  for (let k = 0; k < 20; k++) await js.publish('h.a', new Uint8Array(10)).catch(() => {});
  await retryWhileStarting(() => jsm.streams.update('H', { ...cfg, max_msgs_per_subject: 100 + r }));
  await show(`after update ${r}`);
  await nodes[r % 3].restart(300);
  await new Promise(r => setTimeout(r, 1500));
  await show(`after restarting n${r%3+1}`);
  await nc.request('$JS.API.STREAM.LEADER.STEPDOWN.H', undefined, { timeout: 5000 }).catch(e => console.log('sd', e.message));
  await new Promise(r => setTimeout(r, 1500));
  await show('after stepdown');
}
await nc.close(); for (const n of nodes) await n.stop();

#!/usr/bin/env node
// nats-server #4320: does a clustered stream serialise its expected-last-subject-sequence check?
// Two clients on two nodes publish to one subject at once, each expecting the same last sequence;
// a serialising server accepts one of each pair. Prints JSON: pairs, both accepted, the server's
// version. `npm run build` first; `node scripts/race-expected-sequence.mjs [pairs]` (default 500).
// docs/operations.md "How writes stay correct" quotes its figures.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { startJetStreamCluster } from '../dist/test/helpers/nats-server.js';
import { retryWhileStarting } from '../dist/lib/state/jetstream.js';

const pairs = Number(process.argv[2] ?? 500);
const dir = mkdtempSync(join(tmpdir(), 'pier-race-'));
const nodes = await startJetStreamCluster(dir, 3);
const [a, b] = await Promise.all([connect({ servers: nodes[0].url }), connect({ servers: nodes[1].url })]);
try {
  const jsm = await retryWhileStarting(() => a.jetstreamManager());
  await jsm.streams.add({ name: 'RACE', subjects: ['race.>'], num_replicas: 3 });
  const [ja, jb] = [a.jetstream(), b.jetstream()];
  let both = 0;
  let neither = 0;
  for (let i = 0; i < pairs; i++) {
    const subject = `race.s${i}`;
    await ja.publish(subject, new Uint8Array([0]));
    const last = (await jsm.streams.getMessage('RACE', { last_by_subj: subject })).seq;
    const tries = await Promise.allSettled([ja, jb].map((js) => js.publish(subject, new Uint8Array([1]), { expect: { lastSubjectSequence: last } })));
    const accepted = tries.filter((r) => r.status === 'fulfilled').length;
    if (accepted === 2) both++;
    if (accepted === 0) neither++;
  }
  console.log(JSON.stringify({ server: a.info?.version, pairs, bothAccepted: both, neitherAccepted: neither }));
} finally {
  await Promise.all([a.close(), b.close()]);
  await Promise.all(nodes.map((n) => n.stop()));
  rmSync(dir, { recursive: true, force: true });
}

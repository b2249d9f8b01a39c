import test from 'ava';
import { join } from 'node:path';
import { loadWorkload, WORKLOADS } from '../../chaos/index.js';
import { chaosRun, verdictTable } from '../../chaos/run.js';
import { cleanup, tempDir } from '../helpers/pier.js';

// Every promise held under a seeded stream of faults (issue #25): the production shape, the mixed
// workload through the public listeners, kill -9 / pauses / drains / NATS node restarts for a
// minute, then the checkers over the history. `npm run chaos -- --minutes 10 --seed S` is the long form.
// Its fault schedule drains and pauses an edge and kills registry, upload, token and provider
// replicas within the minute, beside the NATS node restarts (chaos/faults.ts draws them from it).
const SEED = 31337;
/** Checks that may rightly see nothing in a minute (an info row; redeliveries happen only when an ack is lost). */
const MAY_BE_EMPTY = /\(info\)|redelivered/;

test('60 s of faults with a fixed seed: every check holds, and none passes for want of operations', async (t) => {
  t.timeout(6 * 60_000, 'the chaos run: setup, 60 s of faults, settle, checks');
  const dir = tempDir('pier-chaos-');
  const lines: string[] = [];
  let passed = false;
  try {
    const result = await chaosRun({
      seed: SEED,
      durationMs: 60_000,
      dir,
      faults: true,
      workloads: await Promise.all(WORKLOADS.map(loadWorkload)),
      log: (m) => lines.push(m),
    });
    const table = verdictTable(result);
    // What failed comes first: CI shows only part of a long output, and the table is long.
    const failing = result.verdicts.filter((v) => v.anomalies.length > 0 || (v.checked === 0 && !MAY_BE_EMPTY.test(v.check)));
    for (const v of failing) t.log(`FAILED: ${v.check} (checked ${v.checked}): ${v.anomalies.slice(0, 3).join(' | ').slice(0, 600)}`);
    t.log(table);
    for (const v of result.verdicts) t.deepEqual(v.anomalies, [], `${v.check}\n${table}`);
    // A check that looked at nothing proves nothing.
    for (const v of result.verdicts) if (!MAY_BE_EMPTY.test(v.check)) t.true(v.checked > 0, `${v.check}: nothing was checked\n${table}`);
    t.true((result.faults['kill -9'] ?? 0) + (result.faults.drain ?? 0) >= 3, `few faults injected: ${JSON.stringify(result.faults)}`);
    t.true((result.faults['nats restart'] ?? 0) >= 1, `no NATS node restarted: ${JSON.stringify(result.faults)}`);
    passed = result.passed;
  } finally {
    // A failed run keeps its history (not the cluster's files) for inspection.
    if (passed) cleanup(dir);
    else {
      cleanup(join(dir, 'cluster'));
      cleanup(join(dir, 'work'));
      t.log(`chaos history kept in ${join(dir, 'history.jsonl')}\n${lines.slice(-40).join('\n')}`);
    }
  }
});

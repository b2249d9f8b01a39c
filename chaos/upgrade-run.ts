import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ChaosCluster } from './cluster.js';
import { restartProcess, sampleMemory } from './faults.js';
import { History } from './history.js';
import { THIS_BUILD, type Build } from './processes.js';
import { Rng } from './random.js';
import { roll, type Step } from './rolling.js';
import type { Checker, Verdict, Workload, WorkloadContext } from './workload.js';
import { checkProcesses } from './checks/processes.js';
import { excuseOldReleaseRaces } from './checks/old-release.js';
import { checkUpgrade } from './checks/upgrade.js';
import { checkValueKeys } from './checks/value-keys.js';
import { sampleValueKeys } from './value-keys-sampler.js';

export interface UpgradeRunOptions {
  seed: number;
  dir: string;
  /** The build the cluster starts on and is rolled back to. */
  old: Build;
  replicas: 1 | 2;
  /** How long each steady phase runs: on the old build, the new, and the old again. */
  phaseMs: number;
  /** The pause after each replaced process is ready. */
  gapMs: number;
  workloads: Array<{ workload: Workload; check: Checker }>;
  /**
   * The edges' drain (PIER_DRAIN_MS): longer than haproxy takes to see /readyz fail (two checks,
   * ≤ 1 s), and than uWS keeps an idle kept-alive HTTP connection (10 s): by the exit, every
   * connection a client had to the edge has been closed between two requests, none under one.
   */
  edgeDrainMs?: number;
  log?: (message: string) => void;
}

export interface UpgradeRunResult {
  verdicts: Verdict[];
  historyPath: string;
  lines: History['lines'];
  steps: Step[];
  passed: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** The workloads run until the rolls are done; this only bounds a run whose driver hangs. */
const RUN_BOUND_MS = 60 * 60_000;

/**
 * A rolling upgrade under load (issue #41): the chaos production shape started on the old build,
 * the chaos workloads (no faults) running throughout, a phase on the old build, every process
 * replaced one at a time by this build, a phase on it, every process rolled back the same way, a
 * phase on the old build again; then the workloads settle (final reads: on the old build) and the
 * checkers judge the whole history. Every line carries the build phase it was written in (`build`:
 * old, upgrading, new, rolling back, old again). The cluster is always stopped.
 */
export async function upgradeRun(o: UpgradeRunOptions): Promise<UpgradeRunResult> {
  const log = o.log ?? (() => undefined);
  mkdirSync(o.dir, { recursive: true });
  const historyPath = join(o.dir, 'history.jsonl');
  const history = new History(historyPath);
  const rng = new Rng(o.seed);
  const heartbeatMs = 250;
  const peerDeadMs = 2_000;
  const old = { ...o.old, name: 'old' };
  const next = { ...THIS_BUILD, name: 'new' };
  const phase = (build: string) => {
    history.setStamp({ build });
    history.info('upgrade', 'phase', { build });
    log(`phase: ${build}`);
  };
  history.info('run', 'start', { seed: o.seed, upgrade: true, old: o.old, new: THIS_BUILD, replicas: o.replicas, phaseMs: o.phaseMs, gapMs: o.gapMs, heartbeatMs, peerDeadMs, faults: false });
  phase('old');
  const cluster = await ChaosCluster.start(join(o.dir, 'cluster'), { heartbeatMs, peerDeadMs, replicas: o.replicas, build: old, edgeDrainMs: o.edgeDrainMs ?? 11_000 }, (name, code, signal) => {
    history.info('process', 'exited', { target: name, code, signal, unexpected: true });
    log(`process ${name} exited on its own (${code ?? signal})`);
  });
  const steps: Step[] = [];
  let stopSampling = () => undefined as void;
  let stopValueKeys = async () => undefined as void;
  try {
    const contexts = o.workloads.map(({ workload }): [Workload, WorkloadContext] => {
      const dir = join(o.dir, 'work', workload.name);
      mkdirSync(dir, { recursive: true });
      return [workload, { cluster, history, rng: rng.fork(workload.name), deadline: 0, dir, log: (m) => log(`${workload.name}: ${m}`) }];
    });
    for (const [w, ctx] of contexts) {
      log(`setup ${w.name}`);
      await w.setup(ctx);
    }
    stopSampling = sampleMemory(cluster, history, 5_000);
    stopValueKeys = await sampleValueKeys(cluster, history, 2_000);
    for (const [, ctx] of contexts) ctx.deadline = Date.now() + RUN_BOUND_MS;
    const drive = async () => {
      try {
        await sleep(o.phaseMs);
        phase('upgrading');
        steps.push(...(await roll({ cluster, history, to: next, roll: 'upgrade', gapMs: o.gapMs, firstStep: 1, log })));
        phase('new');
        await sleep(o.phaseMs);
        phase('rolling back');
        steps.push(...(await roll({ cluster, history, to: old, roll: 'rollback', gapMs: o.gapMs, firstStep: steps.length + 1, log })));
        phase('old again');
        await sleep(o.phaseMs);
      } finally {
        // The workloads stop starting operations (they read their deadline on every loop).
        for (const [, ctx] of contexts) ctx.deadline = Date.now();
      }
    };
    await Promise.all([drive(), ...contexts.map(([w, ctx]) => w.run(ctx))]);
    history.info('run', 'settle', {});
    for (const p of cluster.processes.values()) if (!p.running) await restartProcess(history, p);
    for (const [w, ctx] of contexts) {
      log(`settle ${w.name}`);
      await w.settle(ctx);
    }
    history.info('run', 'end', {});
  } finally {
    stopSampling();
    await stopValueKeys();
    await cluster.stop();
    await history.close();
  }
  const context = { uploadRoot: cluster.uploadRoot };
  const verdicts: Verdict[] = [...checkProcesses(history.lines), ...checkUpgrade(history.lines), ...checkValueKeys(history.lines)];
  // The workloads' checks judge this build: the previous release's known race, where only it ran,
  // is read as an unknown outcome (checks/old-release.ts); the upgrade checks above see the answers as given.
  const oldRaces = excuseOldReleaseRaces(history.lines);
  verdicts.push({ check: `(info) the previous release's undelete race, where only it ran: ${oldRaces.excused.join('; ') || 'none'}`, checked: oldRaces.excused.length, anomalies: [] });
  for (const { check } of o.workloads) verdicts.push(...(await check(oldRaces.lines, context)));
  return { verdicts, historyPath, lines: history.lines, steps, passed: verdicts.every((v) => v.anomalies.length === 0) };
}

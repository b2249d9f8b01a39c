import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ChaosCluster } from './cluster.js';
import { injectFaults, restartProcess, sampleMemory } from './faults.js';
import { History } from './history.js';
import { Rng } from './random.js';
import type { Checker, Verdict, Workload, WorkloadContext } from './workload.js';
import { checkProcesses } from './checks/processes.js';
import { PowerCutDisks } from '../test/helpers/power-cut-disks.js';

export interface RunOptions {
  seed: number;
  /** How long workloads and faults run (the settle phase comes after). */
  durationMs: number;
  /** Where the history and the cluster's files go. */
  dir: string;
  faults: boolean;
  workloads: Array<{ workload: Workload; check: Checker }>;
  heartbeatMs?: number;
  peerDeadMs?: number;
  /** Cut the power of every node now and then (power-cut.ts): the cluster's state on the power-cut disk. */
  powerCuts?: boolean;
  /** NATS nodes without `sync_interval: always` (to show what a power cut then loses). */
  natsDefaultSync?: boolean;
  log?: (message: string) => void;
}

export interface RunResult {
  verdicts: Verdict[];
  historyPath: string;
  faults: Record<string, number>;
  passed: boolean;
}

/**
 * One chaos run: the cluster, the workloads' setup, then workloads and faults together for the
 * duration, then every process healed and the workloads settled (final reads, closes), then the
 * checkers over the history. The cluster is always stopped, whatever happened.
 */
export async function chaosRun(options: RunOptions): Promise<RunResult> {
  mkdirSync(options.dir, { recursive: true });
  const historyPath = join(options.dir, 'history.jsonl');
  const history = new History(historyPath);
  const rng = new Rng(options.seed);
  const heartbeatMs = options.heartbeatMs ?? 250;
  const peerDeadMs = options.peerDeadMs ?? 2_000;
  const powerCuts = Boolean(options.powerCuts && options.faults);
  const natsDefaultSync = Boolean(options.natsDefaultSync);
  history.info('run', 'start', { seed: options.seed, durationMs: options.durationMs, heartbeatMs, peerDeadMs, faults: options.faults, powerCuts, natsDefaultSync });
  const disk = powerCuts ? await PowerCutDisks.mount(options.dir) : undefined;
  try {
    return await runOn(options, history, historyPath, rng, disk, natsDefaultSync);
  } finally {
    await disk?.unmount();
  }
}

async function runOn(options: RunOptions, history: History, historyPath: string, rng: Rng, disk: PowerCutDisks | undefined, natsDefaultSync: boolean): Promise<RunResult> {
  const log = options.log ?? (() => undefined);
  const heartbeatMs = options.heartbeatMs ?? 250;
  const peerDeadMs = options.peerDeadMs ?? 2_000;
  if (disk) log(`power cuts: data dirs and the upload root on ${disk.pierRoot}, NATS stores on ${disk.natsRoot}${natsDefaultSync ? ' (nats-server syncing by its default, not before it acknowledges)' : ''}`);
  const cluster = await ChaosCluster.start(join(options.dir, 'cluster'), { heartbeatMs, peerDeadMs, stateRoot: disk?.pierRoot, natsStoreDir: disk?.natsRoot, natsDefaultSync }, (name, code, signal) => {
    history.info('process', 'exited', { target: name, code, signal, unexpected: true });
    log(`process ${name} exited on its own (${code ?? signal})`);
  });
  let stopSampling = () => undefined as void;
  try {
    const contexts = options.workloads.map(({ workload }): [Workload, WorkloadContext] => {
      const dir = join(options.dir, 'work', workload.name);
      mkdirSync(dir, { recursive: true });
      return [workload, { cluster, history, rng: rng.fork(workload.name), deadline: 0, dir, log: (m) => log(`${workload.name}: ${m}`) }];
    });
    for (const [w, ctx] of contexts) {
      log(`setup ${w.name}`);
      await w.setup(ctx);
    }
    stopSampling = sampleMemory(cluster, history, 5_000);
    const deadline = Date.now() + options.durationMs;
    history.info('run', 'faults from', { deadline });
    for (const [, ctx] of contexts) ctx.deadline = deadline;
    await Promise.all([
      options.faults ? injectFaults({ cluster, history, rng: rng.fork('faults'), deadline, log, disk }) : Promise.resolve(),
      ...contexts.map(([w, ctx]) => w.run(ctx)),
    ]);
    history.info('run', 'settle', {});
    // Every node up and running again before the final reads (a fault lane that failed may have left some down).
    for (const [i, node] of cluster.bus.nodes.entries()) {
      if (!node.alive) await node.relaunch(60_000).catch((err: Error) => history.info('fault', 'restart failed', { target: `nats-${i + 1}`, attempt: 1, error: err.message }));
    }
    for (const p of cluster.processes.values()) {
      p.resume();
      if (!p.running) await restartProcess(history, p);
    }
    for (const [w, ctx] of contexts) {
      log(`settle ${w.name}`);
      await w.settle(ctx);
    }
    // Whether every edge kept gateway history (the ws checker holds it): from their logs, once everything ran.
    for (const e of cluster.edgeHistoryLogs()) history.info('process', 'edge log', e);
    history.info('run', 'end', {});
  } finally {
    stopSampling();
    await cluster.stop();
    await history.close();
  }
  const context = { uploadRoot: cluster.uploadRoot };
  const verdicts: Verdict[] = [...checkProcesses(history.lines)];
  for (const { check } of options.workloads) verdicts.push(...(await check(history.lines, context)));
  const faults: Record<string, number> = {};
  // A power cut's kill -9 of each process and restart of each node are counted as the one power cut.
  for (const l of history.lines) if (l.kind === 'fault' && !['healed', 'down', 'restart failed', 'restart try failed', 'restart retried', 'power on', 'lane failed'].includes(l.op) && l.cause !== 'power cut') faults[l.op] = (faults[l.op] ?? 0) + 1;
  return { verdicts, historyPath, faults, passed: verdicts.every((v) => v.anomalies.length === 0) };
}

/** The verdict table, as printed at the end of a run. */
export function verdictTable(result: RunResult): string {
  const rows = result.verdicts.map((v) => `${v.anomalies.length === 0 ? 'ok  ' : 'FAIL'}  ${v.check.padEnd(58)} ${String(v.checked).padStart(7)}  ${v.anomalies.length > 0 ? v.anomalies.slice(0, 3).join('; ') : ''}`);
  const faults = Object.entries(result.faults).map(([k, n]) => `${k}: ${n}`).join(', ') || 'none';
  return [`faults injected: ${faults}`, 'verdict  check                                                       checked  anomalies', ...rows, `history: ${result.historyPath}`].join('\n');
}

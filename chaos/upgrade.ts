import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadWorkload, WORKLOADS } from './index.js';
import { verdictTable } from './run.js';
import { tidyRunFolder } from './run-folder.js';
import { upgradeRun, type UpgradeRunResult } from './upgrade-run.js';
import { failureTable, timelineTable } from './upgrade-report.js';
import { buildWorktree, previousRelease, removeWorktree } from './worktree.js';

/**
 * `npm run upgrade [-- --from <commit> --seed S --replicas 1|2 --phase-seconds N --gap-seconds N --dir D --keep]`:
 * a rolling upgrade from the previous release (releases.json, or `--from`) to this checkout and back,
 * under the chaos workloads, judged by the chaos checkers and the upgrade's own (issue #41). Prints
 * the verdict table, the steps' timeline and the failures per step; exit 0 when every check holds.
 * A run that passed in a folder of its own keeps its history alone (run-folder.ts).
 */

/** The chaos workloads, and the carry workload (writes that must outlive the rollback). */
export const UPGRADE_WORKLOADS = [...WORKLOADS, 'carry'] as const;

export interface UpgradeOptions {
  from?: string;
  seed: number;
  replicas: 1 | 2;
  phaseSeconds: number;
  gapSeconds: number;
  dir: string;
  /** Keep the cluster's data of a run that passed (run-folder.ts). */
  keep?: boolean;
}

export interface UpgradeResult extends UpgradeRunResult {
  commit: string;
  fromLabel: string;
  worktree: { reused: boolean; ms: number };
  runMs: number;
}

function parse(argv: string[]): UpgradeOptions {
  const out: UpgradeOptions = { seed: 1, replicas: 2, phaseSeconds: 30, gapSeconds: 3, dir: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--from') out.from = value();
    else if (a === '--seed') out.seed = Number(value());
    else if (a === '--replicas') out.replicas = Number(value()) as 1 | 2;
    else if (a === '--phase-seconds') out.phaseSeconds = Number(value());
    else if (a === '--gap-seconds') out.gapSeconds = Number(value());
    else if (a === '--dir') out.dir = value();
    else if (a === '--keep') out.keep = true;
    else throw new Error(`unknown option ${a} (have --from <commit>, --seed S, --replicas 1|2, --phase-seconds N, --gap-seconds N, --dir D, --keep)`);
  }
  if (!Number.isInteger(out.seed)) throw new Error('--seed: must be an integer');
  if (out.replicas !== 1 && out.replicas !== 2) throw new Error('--replicas: 1 or 2');
  if (!(out.phaseSeconds > 0 && out.phaseSeconds <= 3_600)) throw new Error('--phase-seconds: more than 0, at most 3600');
  if (!(out.gapSeconds >= 0 && out.gapSeconds <= 600)) throw new Error('--gap-seconds: 0 to 600');
  return out;
}

/**
 * The whole upgrade: the previous release built in a worktree under `dir`, the run, the worktree
 * removed (always, whatever happened).
 */
export async function upgrade(o: UpgradeOptions, log: (m: string) => void): Promise<UpgradeResult> {
  const { commit, label } = previousRelease(o.from);
  mkdirSync(o.dir, { recursive: true });
  const wtRoot = join(o.dir, 'from');
  try {
    const wt = buildWorktree(commit, o.dir, log);
    log(`old build ${label} (${commit.slice(0, 12)}) ready in ${(wt.ms / 1000).toFixed(1)} s (node_modules ${wt.reused ? 'hard-linked' : 'installed'})`);
    const started = Date.now();
    const result = await upgradeRun({
      seed: o.seed,
      dir: join(o.dir, 'run'),
      old: wt.build,
      replicas: o.replicas,
      phaseMs: o.phaseSeconds * 1_000,
      gapMs: o.gapSeconds * 1_000,
      workloads: await Promise.all(UPGRADE_WORKLOADS.map(loadWorkload)),
      log,
    });
    return { ...result, commit, fromLabel: label, worktree: { reused: wt.reused, ms: wt.ms }, runMs: Date.now() - started };
  } finally {
    const problem = removeWorktree(wtRoot);
    if (problem) log(problem);
  }
}

/** Everything printed at the end of a run. */
export function report(r: UpgradeResult): string {
  return [
    verdictTable({ verdicts: r.verdicts, historyPath: r.historyPath, faults: {}, passed: r.passed }),
    '',
    timelineTable(r.lines),
    '',
    failureTable(r.lines),
  ].join('\n');
}

async function main(): Promise<number> {
  let args;
  try {
    args = parse(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`upgrade: ${(err as Error).message}\n`);
    return 2;
  }
  const dir = args.dir || mkdtempSync(join(tmpdir(), 'pier-upgrade-'));
  const started = Date.now();
  const log = (m: string) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${m}\n`);
  let result: UpgradeResult;
  try {
    result = await upgrade({ ...args, dir }, log);
  } catch (err) {
    process.stderr.write(`upgrade: ${(err as Error).message}\n`);
    return 2;
  }
  process.stderr.write(`${tidyRunFolder(dir, { passed: result.passed, keep: args.keep === true, madeByRun: !args.dir })}\n`);
  const took = `${((Date.now() - started) / 1000).toFixed(0)} s (old build ${(result.worktree.ms / 1000).toFixed(0)} s, run ${(result.runMs / 1000).toFixed(0)} s)`;
  process.stdout.write(`${report(result)}\nupgrade from ${result.fromLabel} (${result.commit.slice(0, 12)}) to this checkout and back, seed ${args.seed}, ${args.replicas} replica(s) per role, ${took}: ${result.passed ? 'PASSED' : 'FAILED'}\n`);
  return result.passed ? 0 : 1;
}

if (process.argv[1]?.endsWith('chaos/upgrade.js')) process.exitCode = await main();

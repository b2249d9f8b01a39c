import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { mkdtempSync } from 'node:fs';
import { chaosRun, verdictTable } from './run.js';
import { tidyRunFolder } from './run-folder.js';
import type { Checker, Workload } from './workload.js';

/**
 * `npm run chaos [-- --minutes N --seed S --only a,b --no-faults --power-cuts --nats-default-sync --dir D --keep]`:
 * the production shape under a seeded stream of faults and a mixed workload, then the checkers'
 * verdict table. Exit 0 when every check holds, 1 otherwise. The history stays in the run folder
 * for inspection; a run that passed in a folder of its own keeps nothing else (run-folder.ts).
 * `--power-cuts` adds cuts of every node at once over a disk that loses what was
 * not synced (power-cut.ts; root and /dev/fuse); `--nats-default-sync` runs nats-server without
 * `sync_interval: always`, to show what a cut then loses.
 */
export const WORKLOADS = ['vault', 'users', 'ws', 'upload'] as const;

function parse(argv: string[]) {
  const out = { minutes: 1, seed: 1, only: [...WORKLOADS] as string[], faults: true, dir: '', keep: false, powerCuts: false, natsDefaultSync: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--minutes') out.minutes = Number(value());
    else if (a === '--seed') out.seed = Number(value());
    else if (a === '--only') out.only = value().split(',');
    else if (a === '--no-faults') out.faults = false;
    else if (a === '--dir') out.dir = value();
    else if (a === '--keep') out.keep = true;
    else if (a === '--power-cuts') out.powerCuts = true;
    else if (a === '--nats-default-sync') out.natsDefaultSync = true;
    else throw new Error(`unknown option ${a} (have --minutes N, --seed S, --only ${WORKLOADS.join(',')}, --no-faults, --power-cuts, --nats-default-sync, --dir D, --keep)`);
  }
  if (!(out.minutes > 0 && out.minutes <= 120)) throw new Error('--minutes: must be more than 0 and at most 120');
  if (!Number.isInteger(out.seed)) throw new Error('--seed: must be an integer');
  if (out.powerCuts && !out.faults) throw new Error('--power-cuts: a power cut is a fault (drop --no-faults)');
  const unknown = out.only.filter((w) => !(WORKLOADS as readonly string[]).includes(w));
  if (unknown.length > 0) throw new Error(`--only: unknown workload ${unknown.join(', ')}`);
  return out;
}

/** A workload and its checker, from `workloads/<name>.js`. */
export async function loadWorkload(name: string): Promise<{ workload: Workload; check: Checker }> {
  const mod = (await import(`./workloads/${name}.js`)) as { workload: Workload; check: Checker };
  return { workload: mod.workload, check: mod.check };
}

async function main(): Promise<number> {
  let args;
  try {
    args = parse(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`chaos: ${(err as Error).message}\n`);
    return 2;
  }
  const dir = args.dir || mkdtempSync(join(tmpdir(), 'pier-chaos-'));
  const started = Date.now();
  const result = await chaosRun({
    seed: args.seed,
    durationMs: Math.round(args.minutes * 60_000),
    dir,
    faults: args.faults,
    powerCuts: args.powerCuts,
    natsDefaultSync: args.natsDefaultSync,
    workloads: await Promise.all(args.only.map(loadWorkload)),
    log: (m) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${m}\n`),
  });
  process.stderr.write(`${tidyRunFolder(dir, { passed: result.passed, keep: args.keep, madeByRun: !args.dir })}\n`);
  process.stdout.write(`${verdictTable(result)}\nseed ${args.seed}, ${args.minutes} min${args.powerCuts ? ', power cuts' : ''}${args.natsDefaultSync ? ', nats-server default sync' : ''}: ${result.passed ? 'PASSED' : 'FAILED'}\n`);
  return result.passed ? 0 : 1;
}

if (process.argv[1]?.endsWith('chaos/index.js')) process.exitCode = await main();

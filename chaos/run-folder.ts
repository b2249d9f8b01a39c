import { lstatSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What a run leaves in the folder it made for itself (none given with `--dir`). A failure keeps
 * everything: the processes' logs and data are what explains it. A pass keeps its history alone,
 * unless `--keep`: the cluster's data (three JetStream nodes, the stores, the uploaded files) took
 * 1.7-2.6 GB a run on this project's machine, and a day of runs filled its disk (benchmarks then
 * failed with ENOSPC). Symbolic links are removed, never followed.
 */
export const KEPT_FILE = 'history.jsonl';

export function tidyRunFolder(dir: string, o: { passed: boolean; keep: boolean; madeByRun: boolean }): string {
  if (!o.madeByRun || o.keep || !o.passed) return `run folder kept: ${dir}`;
  try {
    const bytes = prune(dir);
    return `run folder ${dir}: the history kept, ${(bytes / 2 ** 20).toFixed(0)} MiB of cluster data removed (--keep keeps it)`;
  } catch (err) {
    return `run folder kept: ${dir} (tidying it failed: ${(err as Error).message})`;
  }
}

/** Removes everything under `dir` but the histories; answers the bytes removed. */
function prune(dir: string): number {
  let bytes = 0;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    if (st.isDirectory()) {
      bytes += prune(path);
      if (readdirSync(path).length === 0) rmdirSync(path);
    } else if (!(st.isFile() && name === KEPT_FILE)) {
      bytes += st.isFile() ? st.size : 0;
      rmSync(path, { force: true });
    }
  }
  return bytes;
}

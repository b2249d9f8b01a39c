import type { ChaosCluster } from './cluster.js';
import type { History, HistoryLine } from './history.js';
import type { Rng } from './random.js';

/** What a workload is given: the cluster (through its public listeners only), the history, its own randomness. */
export interface WorkloadContext {
  cluster: ChaosCluster;
  history: History;
  rng: Rng;
  /** The workload stops starting new operations at this time (ms since the epoch). */
  deadline: number;
  /** A scratch folder of its own. */
  dir: string;
  log: (message: string) => void;
}

/**
 * One kind of traffic. `setup` makes what it needs through the admin API (users, apps) before any
 * fault; `run` drives operations until the deadline, recording each invocation and outcome; `settle`
 * ends what it holds open (connections) once the faults are over, and reads back what the checker
 * needs (final reads), still recording in the history.
 */
export interface Workload {
  readonly name: string;
  setup(ctx: WorkloadContext): Promise<void>;
  run(ctx: WorkloadContext): Promise<void>;
  settle(ctx: WorkloadContext): Promise<void>;
}

/** One line of the verdict table. */
export interface Verdict {
  check: string;
  /** How many operations (or items) the check looked at. */
  checked: number;
  anomalies: string[];
}

/**
 * A checker reads the history (and the disk, for uploads) after the run. It imports nothing of the
 * system under test: it knows only what the history says was invoked and acknowledged.
 */
export type Checker = (lines: readonly HistoryLine[], context: { uploadRoot: string }) => Verdict[] | Promise<Verdict[]>;

import type { ChaosCluster } from './cluster.js';
import type { History } from './history.js';
import type { Build, ChaosProcess } from './processes.js';

/**
 * One rolling replacement: every process of the cluster, one at a time, stopped as an operator
 * stops it (SIGTERM: an edge drains first, an actor leaves its queue groups) and started again on
 * another build, on the same ports and data; the next step only once it is ready (and, for an edge,
 * its /readyz answers, so the balancer has it back before the other edge goes).
 *
 * History (kind `upgrade`, each with `step`, `target`, `roles`, `roll`): `step {from, to}` when the
 * step begins, `drain` as the SIGTERM is sent, `down` when the process has exited, `ready {readyMs}`
 * (ms from `drain`) or `start failed {attempt, error}`, `step end` after the gap. The ws checker
 * reads `drain` and `down` of an edge as its replacement window; the upgrade checker the rest.
 */
export interface Step {
  step: number;
  roll: string;
  target: string;
  roles: string;
  from: string;
  to: string;
  /** ms since the epoch. */
  startedAt: number;
  downAt: number | null;
  readyAt: number | null;
  endedAt: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const KIND = 'upgrade';
/** A start that failed is tried again this many times (its ports may linger a moment). */
const START_ATTEMPTS = 3;
/** How long an edge's /readyz is waited for after "pier ready". */
const EDGE_READY_MS = 20_000;

/** Actors first (the registry first of them: the others read it), the admin, then the edges: any order must work; this one is fixed. */
export function rollOrder(cluster: ChaosCluster): ChaosProcess[] {
  const all = [...cluster.processes.values()];
  return [...all.filter((p) => p.roles !== 'edge' && p.roles !== 'admin'), ...all.filter((p) => p.roles === 'admin'), ...all.filter((p) => p.roles === 'edge')];
}

export interface RollOptions {
  cluster: ChaosCluster;
  history: History;
  to: Build;
  /** A name for this roll in the history (`upgrade`, `rollback`). */
  roll: string;
  /** The pause after each step's process is ready, before the next step. */
  gapMs: number;
  /** Numbering continues across rolls. */
  firstStep: number;
  log: (message: string) => void;
}

async function edgeAnswers(p: ChaosProcess): Promise<boolean> {
  const port = p.ports?.public;
  if (port === undefined) return false;
  const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(() => null);
  return res?.status === 200;
}

async function replace(o: RollOptions, p: ChaosProcess, step: number): Promise<Step> {
  const h = o.history;
  const base = { step, target: p.name, roles: p.roles, roll: o.roll };
  const from = p.build.name;
  const startedAt = Date.now();
  h.info(KIND, 'step', { ...base, from, to: o.to.name });
  h.info(KIND, 'drain', base);
  await p.drain();
  const downAt = Date.now();
  h.info(KIND, 'down', base);
  p.build = o.to;
  let readyAt: number | null = null;
  for (let attempt = 1; attempt <= START_ATTEMPTS && readyAt === null; attempt++) {
    try {
      await p.start();
      if (p.roles === 'edge') {
        const deadline = Date.now() + EDGE_READY_MS;
        while (!(await edgeAnswers(p)) && Date.now() < deadline) await sleep(100);
      }
      readyAt = Date.now();
    } catch (err) {
      h.info(KIND, 'start failed', { ...base, attempt, error: String((err as Error).message).slice(0, 500) });
      await sleep(1_000);
    }
  }
  if (readyAt !== null) h.info(KIND, 'ready', { ...base, readyMs: readyAt - startedAt });
  o.log(`${o.roll} step ${step}: ${p.name} ${from} → ${o.to.name}${readyAt === null ? ' did NOT start' : `, ready after ${readyAt - startedAt} ms`}`);
  await sleep(o.gapMs);
  const endedAt = Date.now();
  h.info(KIND, 'step end', base);
  return { step, roll: o.roll, target: p.name, roles: p.roles, from, to: o.to.name, startedAt, downAt, readyAt, endedAt };
}

/** Replaces every process, one at a time, in `rollOrder`; answers the steps. */
export async function roll(o: RollOptions): Promise<Step[]> {
  const steps: Step[] = [];
  for (const p of rollOrder(o.cluster)) steps.push(await replace(o, p, o.firstStep + steps.length));
  return steps;
}

import { readFileSync } from 'node:fs';
import { round } from './load.js';

/**
 * One goal of issue #26: Pier's figure next to its floor's (the same job done by the least code
 * the runtime allows, measured in the same run), the ratio, the bound and whether it was met.
 */
export interface Goal {
  goal: string;
  pier: number;
  floor: number;
  ratio: number;
  bound: string;
  met: boolean;
}

/** Pier / floor must be at least `min` (throughputs). */
export function ratioAtLeast(goal: string, pier: number, floor: number, min: number): Goal {
  const ratio = round(pier / floor, 2);
  return { goal, pier: round(pier), floor: round(floor), ratio, bound: `>= ${min}`, met: ratio >= min };
}

/** Pier / floor must be at most `max` (costs, latencies); `absoluteMax`: and Pier's own figure at most that. */
export function ratioAtMost(goal: string, pier: number, floor: number, max: number, absoluteMax?: number): Goal {
  const ratio = round(pier / floor, 2);
  const met = ratio <= max && (absoluteMax === undefined || pier <= absoluteMax);
  return { goal, pier: round(pier), floor: round(floor), ratio, bound: absoluteMax === undefined ? `<= ${max}` : `<= ${max} and pier <= ${absoluteMax}`, met };
}

/** An absolute bound with no floor to compare with (the floor column says what it is compared to: 0). */
export function atLeast(goal: string, pier: number, min: number): Goal {
  return { goal, pier: round(pier), floor: 0, ratio: 0, bound: `pier >= ${min}`, met: pier >= min };
}
export function atMost(goal: string, pier: number, max: number): Goal {
  return { goal, pier: round(pier), floor: 0, ratio: 0, bound: `pier <= ${max}`, met: pier <= max };
}

/** CPU seconds a process (all its threads) has used so far, from /proc (Linux; 10 ms ticks). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command (which may hold spaces, hence from the last ')'): utime is 14th, stime 15th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Runs `fn` and returns its result with the CPU µs that `pid` spent per `count(result)` operations. */
export async function cpuPerOp<T>(pid: number | number[], fn: () => Promise<T>, count: (r: T) => number): Promise<{ result: T; cpu_us_per_op: number }> {
  const pids = Array.isArray(pid) ? pid : [pid];
  const cpu = () => pids.reduce((sum, p) => sum + cpuSeconds(p), 0);
  const before = cpu();
  const result = await fn();
  const used = cpu() - before;
  return { result, cpu_us_per_op: round((used * 1e6) / Math.max(1, count(result)), 1) };
}

import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';
import { absorbed, completedUploads, contended, failed, readRequests, readSteps, rolesOf, type Request, type StepRecord } from './upgrade-history.js';

/**
 * The rolling upgrade judged from its history (issue #41): every process was replaced and rolled
 * back, each ready within the bound; a request failed only while a process it passes through (its
 * role, or the edge) was being replaced; and, where the workload retries, its retry succeeded.
 *
 * A step's window runs from its SIGTERM to the next step's. A failure belongs to the first step
 * whose window overlaps the request (invocation to outcome) and replaced a role it passes through;
 * failing that (an anomaly), to the first step it overlaps at all. A request waiting out its
 * deadline can overlap two steps: the one whose role it uses is the one that failed it. A failure
 * that overlaps no step happened with nothing being replaced: an anomaly whatever it is.
 */
export interface StepFailures {
  /** The step, or null for failures outside every step. */
  step: StepRecord | null;
  failed: Request[];
  /** Of those, the ones no retry absorbed (every vault and users failure: they are sent once). */
  unabsorbed: Request[];
}

const READY_BOUND_MS = 60_000;

export function stepFailures(lines: readonly HistoryLine[]): StepFailures[] {
  const steps = readSteps(lines);
  const requests = readRequests(lines);
  const done = completedUploads(lines);
  const windows = steps.map((s, i) => ({ s, from: s.startedAt, to: steps[i + 1]?.startedAt ?? s.endedAt ?? Infinity }));
  const rows = new Map<StepRecord | null, StepFailures>([[null, { step: null, failed: [], unabsorbed: [] }], ...steps.map((s): [StepRecord, StepFailures] => [s, { step: s, failed: [], unabsorbed: [] }])]);
  for (const r of requests) {
    if (!failed(r)) continue;
    const overlapping = windows.filter((x) => r.invokedAt < x.to && r.endedAt >= x.from);
    const w = overlapping.find((x) => rolesOf(r).includes(x.s.roles)) ?? overlapping[0];
    const row = rows.get(w?.s ?? null)!;
    row.failed.push(r);
    if (!absorbed(r, requests, done)) row.unabsorbed.push(r);
  }
  return [...rows.values()];
}

const describe = (r: Request) => `${r.id} ${r.kind} ${r.op}${r.status === undefined ? '' : ` (${r.status})`}`;

export function checkUpgrade(lines: readonly HistoryLine[]): Verdict[] {
  const steps = readSteps(lines);
  const processes = [...new Set(steps.map((s) => s.target))];
  const rolls = [...new Set(steps.map((s) => s.roll))];
  const missing: string[] = [];
  if (steps.length === 0) missing.push('no upgrade step in the history');
  for (const p of processes) for (const roll of rolls) if (!steps.some((s) => s.target === p && s.roll === roll && s.readyAt !== undefined)) missing.push(`${p}: no ${roll} step that ended ready`);
  const slow = steps.filter((s) => s.startFailures.length > 0 || s.readyMs === undefined || s.readyMs > READY_BOUND_MS).map((s) => `step ${s.step} ${s.target}: ${s.readyMs === undefined ? 'never ready' : `ready after ${s.readyMs} ms`}${s.startFailures.length > 0 ? `; ${s.startFailures.join('; ')}` : ''}`);

  const rows = stepFailures(lines);
  const requests = readRequests(lines);
  const misplaced: string[] = [];
  const unretried: string[] = [];
  const races: string[] = [];
  let failures = 0;
  let retrying = 0;
  for (const row of rows) {
    for (const r of row.failed) {
      failures++;
      // The vault's answer to a race of writes of one secret, wherever it falls (upgrade-history.ts `contended`).
      if (contended(r, requests)) {
        races.push(describe(r));
        continue;
      }
      const roles = rolesOf(r);
      if (!row.step) misplaced.push(`${describe(r)}: failed with no process being replaced (build phase ${r.build ?? '?'})`);
      else if (!roles.includes(row.step.roles)) misplaced.push(`${describe(r)}: failed during step ${row.step.step} (${row.step.target}), a role it does not pass through (${roles.join(', ')})`);
      if (r.lane === undefined) continue;
      retrying++;
      if (row.unabsorbed.includes(r)) unretried.push(`${describe(r)} on ${r.lane}: no later success on it`);
    }
  }
  return [
    { check: 'upgrade: every process replaced by the new build and rolled back, each ready', checked: processes.length, anomalies: missing },
    { check: `upgrade: every step's process ready within ${READY_BOUND_MS / 1000} s, no start failed`, checked: steps.length, anomalies: slow },
    { check: 'upgrade: requests failed only while a process of their role (or an edge) was replaced', checked: failures, anomalies: misplaced },
    { check: 'upgrade: a failed request that the workload retries (upload, ws connect, carry) succeeded on retry', checked: retrying, anomalies: unretried },
    { check: `upgrade: (info) vault writes answered 503 racing another write of the same secret (a lost write that could not put back: the vault's designed answer, not a replacement's): ${races.length}${races.length > 0 ? ` (${races.slice(0, 3).join(', ')})` : ''}`, checked: races.length, anomalies: [] },
  ];
}

import type { HistoryLine } from './history.js';
import { stepFailures } from './checks/upgrade.js';
import { readSteps } from './checks/upgrade-history.js';
import type { Request } from './checks/upgrade-history.js';

/** The upgrade run's two tables beside the verdicts: the steps' timeline, and what failed during each. */

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** Time offset from the run's start, process, from → to build, how long until ready. */
export function timelineTable(lines: readonly HistoryLine[]): string {
  const start = lines[0]?.t ?? 0;
  const phases = lines.filter((l) => l.kind === 'upgrade' && l.op === 'phase').map((l) => ({ t: l.t, text: `+${secs(l.t - start).padStart(8)}  phase: ${String(l.build)}` }));
  const steps = readSteps(lines).map((s) => {
    const ready = s.readyMs === undefined ? 'NEVER READY' : `ready after ${secs(s.readyMs)}`;
    const down = s.downAt === undefined ? '' : ` (down after ${secs(s.downAt - s.startedAt)})`;
    return { t: s.startedAt, text: `+${secs(s.startedAt - start).padStart(8)}  ${String(s.step).padStart(3)} ${s.roll.padEnd(8)} ${s.target.padEnd(12)} ${s.from} → ${s.to}: ${ready}${down}` };
  });
  const rows = [...phases, ...steps].sort((x, y) => x.t - y.t);
  return ['timeline (offset from the run start; a step: roll, process, build from → to, ready after its SIGTERM)', ...rows.map((r) => r.text)].join('\n');
}

function byKind(rs: Request[]): string {
  const counts = new Map<string, number>();
  for (const r of rs) counts.set(`${r.kind} ${r.op}`, (counts.get(`${r.kind} ${r.op}`) ?? 0) + 1);
  return [...counts.entries()].map(([k, n]) => `${k}: ${n}`).join(', ');
}

/** The span a set of failures covers: first invocation to last outcome. */
const span = (rs: Request[]) => (rs.length === 0 ? '-' : secs(Math.max(...rs.map((r) => r.endedAt)) - Math.min(...rs.map((r) => r.invokedAt))));

/**
 * Per step: the requests that failed as a client without retry sees them (every failure), and as it
 * sees them after the workloads' retries (those no retry absorbed; vault and users send each request
 * once, so theirs all stay), each with the span they cover.
 */
export function failureTable(lines: readonly HistoryLine[]): string {
  const rows = stepFailures(lines).filter((r) => r.step !== null || r.failed.length > 0);
  const head = 'step  process       failed  span       after retry  span       what failed (no retry)';
  const body = rows.map((r) => {
    const name = r.step ? `${String(r.step.step).padStart(4)}  ${r.step.target.padEnd(12)}` : '   -  (no step)    ';
    return `${name}  ${String(r.failed.length).padStart(6)}  ${span(r.failed).padEnd(9)}  ${String(r.unabsorbed.length).padStart(11)}  ${span(r.unabsorbed).padEnd(9)}  ${byKind(r.failed)}`;
  });
  const total = rows.reduce((n, r) => n + r.failed.length, 0);
  const left = rows.reduce((n, r) => n + r.unabsorbed.length, 0);
  return [`requests failed per step (no answer, deadline, 5xx, 429): ${total} in all, ${left} after retries`, head, ...body].join('\n');
}

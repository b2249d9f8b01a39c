import type { HistoryLine } from '../history.js';
import { readRequests, readSteps, type Request, type StepRecord } from './upgrade-history.js';

/**
 * The previous release's known vault race, told apart from this build's (the upgrade run only).
 *
 * 0.3.0's undelete on JetStream is two commits and does not put back the first when the second
 * loses a race: an undelete racing a delete or a destroy of the same secret can answer 404 "no
 * deleted secret" and yet have brought the secret back (seeds 7213, 7278, 7279). This build puts
 * back what a losing write committed (docs/vault.md "Destroyed"), so the race is judged as a defect
 * wherever this build may have answered. Where only the previous release's vault replicas ran for
 * the whole of the request, its 404 says nothing of the effect: it is read as unknown, which the
 * vault checks take as "may have taken effect", and listed in an info row so it stays visible.
 *
 * Told from the history alone: the steps say when each vault process ran this build (from its
 * upgrade step's start to its rollback step's ready, taken wide), the requests say which raced.
 */
const RACING = new Set(['delete', 'destroy']);

/** The windows in which each vault process may have been answering on this build. */
function thisBuildWindows(steps: readonly StepRecord[]): Array<{ from: number; to: number }> {
  const vaultSteps = steps.filter((s) => s.roles === 'vault');
  return [...new Set(vaultSteps.map((s) => s.target))].map((target) => {
    const up = vaultSteps.find((s) => s.target === target && s.roll === 'upgrade');
    const back = vaultSteps.find((s) => s.target === target && s.roll === 'rollback');
    // No upgrade step recorded: it may have run this build at any time.
    return { from: up?.startedAt ?? -Infinity, to: back ? (back.readyAt ?? back.endedAt ?? Infinity) : Infinity };
  });
}

function racedByDeleteOrDestroy(u: Request, all: readonly Request[]): boolean {
  return all.some((o) => o.id !== u.id && o.kind === 'vault' && o.key === u.key && RACING.has(o.op) && o.invokedAt < u.endedAt && o.endedAt > u.invokedAt);
}

export interface OldReleaseExcuses {
  /** The history with each excused refusal turned into an unknown outcome. */
  lines: HistoryLine[];
  /** The ids of the excused requests, with what they raced. */
  excused: string[];
}

export function excuseOldReleaseRaces(lines: readonly HistoryLine[]): OldReleaseExcuses {
  const steps = readSteps(lines);
  if (steps.length === 0) return { lines: [...lines], excused: [] };
  const windows = thisBuildWindows(steps);
  // No vault step recorded: when this build served the vault is not known, so nothing is excused.
  if (windows.length === 0) return { lines: [...lines], excused: [] };
  const requests = readRequests(lines);
  const ids = new Map<string, string>();
  for (const r of requests) {
    if (r.kind !== 'vault' || r.op !== 'undelete' || r.outcome !== 'fail' || r.status !== 404 || r.key === undefined) continue;
    const onlyOld = windows.every((w) => r.endedAt < w.from || r.invokedAt > w.to);
    if (onlyOld && racedByDeleteOrDestroy(r, requests)) ids.set(r.id, `${r.id} undelete of ${r.key} (404, raced a delete or destroy, only the previous release's vault running)`);
  }
  const out = lines.map((l) => (l.kind === 'vault' && l.phase === 'fail' && ids.has(l.id) ? { ...l, phase: 'unknown' as const, excused: 'previous release undelete race' } : l));
  return { lines: out, excused: [...ids.values()] };
}

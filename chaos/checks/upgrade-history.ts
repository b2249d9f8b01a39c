import type { HistoryLine } from '../history.js';

/**
 * A rolling upgrade's history read back (the steps chaos/rolling.ts writes, the requests every
 * workload records), for the upgrade checker and the run's report. Nothing of Pier is imported.
 */
export interface StepRecord {
  step: number;
  roll: string;
  target: string;
  roles: string;
  from: string;
  to: string;
  startedAt: number;
  downAt?: number;
  readyAt?: number;
  readyMs?: number;
  endedAt?: number;
  startFailures: string[];
}

/** One request a workload made: its invocation and outcome. */
export interface Request {
  kind: string;
  op: string;
  id: string;
  invokedAt: number;
  endedAt: number;
  outcome: 'ok' | 'fail' | 'unknown';
  status?: number;
  /** What a retry of it is recognised by (the upload's file, the ws slot, the carry key). */
  lane?: string;
  /** The cluster's build phase when it was invoked (the history's stamp). */
  build?: string;
  /** The secret a vault request names. */
  key?: string;
}

export function readSteps(lines: readonly HistoryLine[]): StepRecord[] {
  const steps = new Map<number, StepRecord>();
  for (const l of lines) {
    if (l.kind !== 'upgrade' || typeof l.step !== 'number') continue;
    if (l.op === 'step') {
      steps.set(l.step, { step: l.step, roll: String(l.roll), target: String(l.target), roles: String(l.roles), from: String(l.from), to: String(l.to), startedAt: l.t, startFailures: [] });
      continue;
    }
    const s = steps.get(l.step);
    if (!s) continue;
    if (l.op === 'down') s.downAt = l.t;
    else if (l.op === 'ready') {
      s.readyAt = l.t;
      s.readyMs = Number(l.readyMs);
    } else if (l.op === 'start failed') s.startFailures.push(`attempt ${String(l.attempt)}: ${String(l.error).slice(0, 200)}`);
    else if (l.op === 'step end') s.endedAt = l.t;
  }
  return [...steps.values()].sort((a, b) => a.step - b.step);
}

/** The workloads whose requests are judged, and what identifies a retry of one. */
const LANE: Record<string, (invoke: HistoryLine) => string | undefined> = {
  vault: () => undefined,
  users: () => undefined,
  upload: (l) => (typeof l.file === 'string' ? `file ${l.file}` : undefined),
  ws: (l) => (l.op === 'connect' && typeof l.slot === 'number' ? `slot ${l.slot}` : undefined),
  carry: (l) => (l.op === 'create' && typeof l.key === 'string' ? `key ${l.key}` : undefined),
};

export function readRequests(lines: readonly HistoryLine[]): Request[] {
  const invokes = new Map<string, HistoryLine>();
  const out: Request[] = [];
  for (const l of lines) {
    if (!(l.kind in LANE)) continue;
    if (l.phase === 'invoke') invokes.set(l.id, l);
    else if (l.phase === 'ok' || l.phase === 'fail' || l.phase === 'unknown') {
      const inv = invokes.get(l.id);
      if (!inv) continue;
      invokes.delete(l.id);
      out.push({
        kind: l.kind,
        op: l.op,
        id: l.id,
        invokedAt: inv.t,
        endedAt: l.t,
        outcome: l.phase,
        ...(typeof l.status === 'number' ? { status: l.status } : {}),
        ...(LANE[l.kind](inv) === undefined ? {} : { lane: LANE[l.kind](inv) }),
        ...(typeof inv.build === 'string' ? { build: inv.build } : {}),
        ...(l.kind === 'vault' && typeof inv.key === 'string' ? { key: inv.key } : {}),
      });
    }
  }
  return out;
}

/**
 * A request the platform failed (not one it refused on its merits): no answer, a deadline, a 5xx,
 * a 429. Every workload records those as `unknown` (or, 429, `fail`); a 4xx refusal is the
 * workloads' checkers' to judge (a revoked token refused is the point).
 */
export function failed(r: Request): boolean {
  return r.outcome === 'unknown' || (r.status !== undefined && (r.status >= 500 || r.status === 429));
}

const VAULT_WRITES = new Set(['create', 'update', 'delete', 'restore', 'undelete', 'destroy']);

/**
 * A vault write answered 503 while another write of the same secret was in flight: the vault's
 * designed answer when a write that lost a race cannot put back what it committed, because another
 * write changed it meanwhile (the one it lost to, building on what it had committed, or a third:
 * docs/vault.md "Destroyed", JetStream). Its outcome is unknown, as the vault checks take it; it
 * says nothing of a process being replaced. Told from the history alone (no answer's text): the
 * race it needs, two writes of one secret at once.
 */
export function contended(r: Request, all: readonly Request[]): boolean {
  if (r.kind !== 'vault' || r.status !== 503 || r.key === undefined || !VAULT_WRITES.has(r.op)) return false;
  return all.some((o) => o.id !== r.id && o.kind === 'vault' && o.key === r.key && VAULT_WRITES.has(o.op) && o.invokedAt < r.endedAt && o.endedAt > r.invokedAt);
}

/**
 * Whether a later request on the same lane succeeded: the retry the workload made absorbed it. Only
 * the upload (per file, and its `completed`), ws connects (per slot) and carry creates (per key)
 * retry; vault and users requests are sent once and have no lane.
 */
export function absorbed(r: Request, all: readonly Request[], completedFiles: ReadonlySet<string>): boolean {
  if (r.lane === undefined) return false;
  if (r.kind === 'upload') return completedFiles.has(r.lane);
  return all.some((o) => o.lane === r.lane && o.kind === r.kind && o.invokedAt >= r.endedAt && (o.outcome === 'ok' || (r.kind === 'carry' && o.status === 409)));
}

export function completedUploads(lines: readonly HistoryLine[]): Set<string> {
  return new Set(lines.filter((l) => l.kind === 'upload' && l.op === 'completed').map((l) => `file ${String(l.file)}`));
}

/** The roles a request passes through (its edge, and the actors behind it): what may fail it while replaced. */
export function rolesOf(r: Request): string[] {
  // Every edge request also needs the edge's view of the registry to be fresh (docs/operations.md):
  // with one registry replica, its replacement outlasting PIER_REGISTRY_MAX_STALENESS_MS on a loaded
  // host refuses them (503), as a CI run showed for vault requests.
  // The operator's undelete and destroy go through the admin API, not an edge.
  if (r.kind === 'vault' && (r.op === 'undelete' || r.op === 'destroy')) return ['admin', 'vault', 'registry'];
  if (r.kind === 'vault' || r.kind === 'carry') return ['edge', 'vault', 'registry'];
  if (r.kind === 'upload') return ['edge', 'upload', 'registry'];
  // An app's send is checked against its key and secret by the registry (pier.registry.app.verify)
  // whenever the edge's memory of the pass has lapsed; a browser's upgrade needs the registry view too.
  if (r.kind === 'ws') return ['edge', 'registry'];
  // A user's probe is an edge request too: the user token and the app are checked against the edge's
  // registry view (a CI run: two probes 503 while the one registry replica's rollback outlasted it).
  if (r.op === 'probe') return ['edge', 'registry'];
  if (r.op === 'access probe') return ['edge', 'vault', 'registry'];
  // The token actor asks the registry for the app's credentials (pier.registry.app.credentials).
  if (r.op === 'access' || r.op === 'old key') return ['edge', 'token', 'registry'];
  return ['admin', 'registry'];
}

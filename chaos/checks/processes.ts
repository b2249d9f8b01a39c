import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/** Growth a survivor may show between its baseline and its last sample: 3× plus 64 MiB. */
const MAX_FACTOR = 3;
const MAX_EXTRA_KIB = 64 * 1024;
/** Whatever the baseline, no process may pass this. */
const CEILING_KIB = 1024 * 1024;
/** A process warms up (caches, connections, JIT) this long after it started before its baseline is taken. */
const WARM_UP_MS = 15_000;

/**
 * No process exited that the injector did not stop, and no survivor's memory grew without bound:
 * per process (by pid), the baseline is its first sample once it has run WARM_UP_MS (a process
 * restarted by a kill -9 starts small and fills up within seconds: that is warm-up, not a leak),
 * and its last sample stays within 3× the baseline plus 64 MiB, and under 1 GiB.
 */
/** A failed try's last non-empty line: the process's own one-line error, when it wrote one. */
const lastLine = (text: string) => text.split('\n').filter((l) => l.trim() !== '').at(-1)?.slice(0, 120) ?? '';

export function checkProcesses(lines: readonly HistoryLine[]): Verdict[] {
  const exits = lines.filter((l) => l.kind === 'process' && l.op === 'exited');
  const series = new Map<string, Array<{ t: number; kib: number }>>();
  for (const l of lines) {
    if (l.kind !== 'process' || l.op !== 'rss') continue;
    const key = `${String(l.target)} pid ${String(l.pid)}`;
    series.set(key, [...(series.get(key) ?? []), { t: l.t, kib: Number(l.kib) }]);
  }
  const grown: string[] = [];
  let sampled = 0;
  for (const [key, samples] of series) {
    const warm = samples.filter((s) => s.t >= samples[0].t + WARM_UP_MS);
    if (warm.length < 3) continue;
    sampled++;
    const base = warm[0].kib;
    const last = warm[warm.length - 1].kib;
    if (last > base * MAX_FACTOR + MAX_EXTRA_KIB || last > CEILING_KIB) grown.push(`${key}: ${Math.round(base / 1024)} → ${Math.round(last / 1024)} MiB`);
  }
  // A restart not ready within 60 s of its first try (faults.ts restartProcess) is an outage. One
  // whose first try failed and a later one was ready in time is what a supervisor gives: counted apart.
  const restarts = lines.filter((l) => l.kind === 'fault' && l.op === 'healed').length;
  const slowStarts = lines.filter((l) => l.kind === 'fault' && l.op === 'restart failed').map((l) => `${String(l.target)}: restart ${String(l.attempt)} failed: ${String(l.error).slice(0, 800)}`);
  const retried = lines.filter((l) => l.kind === 'fault' && l.op === 'restart retried');
  const triesFailed = lines.filter((l) => l.kind === 'fault' && l.op === 'restart try failed');
  // Only where the injector ran (a rolling upgrade, or a run without faults, has no lane to judge).
  const faultLines = lines.filter((l) => l.kind === 'fault');
  const lanes = faultLines.filter((l) => l.op === 'lane failed').map((l) => `the ${String(l.target)} lane failed: ${String(l.error).slice(0, 300)}`);
  return [
    { check: 'every restarted process was ready within 60 s of its first try', checked: restarts, anomalies: slowStarts },
    {
      check: `(info) restarts ready in time after a failed try: ${retried.map((l) => `${String(l.target)} (${String(l.attempts)} tries, ${String(l.readyAfterMs)} ms)`).join(', ') || 'none'}; first words of each failed try: ${[...new Set(triesFailed.map((l) => lastLine(String(l.error))))].join(' | ') || 'none'}`,
      checked: retried.length,
      anomalies: [],
    },
    ...(faultLines.length > 0 ? [{ check: 'the fault injector ran every lane to its end', checked: new Set(faultLines.map((l) => l.target)).size, anomalies: lanes }] : []),
    { check: 'no process exited other than those the injector killed', checked: new Set(lines.filter((l) => l.kind === 'process').map((l) => l.target)).size, anomalies: exits.map((e) => `${String(e.target)} exited (${String(e.code ?? e.signal)})`) },
    { check: "survivors' memory stayed bounded (after warm-up: last ≤ 3 × first + 64 MiB, < 1 GiB)", checked: sampled, anomalies: grown },
  ];
}

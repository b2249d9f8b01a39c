import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';

/** Growth a survivor may show between its first and last sample: 3× plus 64 MiB (caches warm up). */
const MAX_FACTOR = 3;
const MAX_EXTRA_KIB = 64 * 1024;

/**
 * No process exited that the injector did not stop, and no survivor's memory grew without bound
 * (a process, by pid, sampled at least three times: its last sample within the bound of its first).
 */
export function checkProcesses(lines: readonly HistoryLine[]): Verdict[] {
  const exits = lines.filter((l) => l.kind === 'process' && l.op === 'exited');
  const series = new Map<string, number[]>();
  for (const l of lines) {
    if (l.kind !== 'process' || l.op !== 'rss') continue;
    const key = `${String(l.target)} pid ${String(l.pid)}`;
    series.set(key, [...(series.get(key) ?? []), Number(l.kib)]);
  }
  const grown: string[] = [];
  let sampled = 0;
  for (const [key, kib] of series) {
    if (kib.length < 3) continue;
    sampled++;
    const first = kib[0];
    const last = kib[kib.length - 1];
    if (last > first * MAX_FACTOR + MAX_EXTRA_KIB) grown.push(`${key}: ${Math.round(first / 1024)} → ${Math.round(last / 1024)} MiB`);
  }
  return [
    { check: 'no process exited other than those the injector killed', checked: new Set(lines.filter((l) => l.kind === 'process').map((l) => l.target)).size, anomalies: exits.map((e) => `${String(e.target)} exited (${String(e.code ?? e.signal)})`) },
    { check: 'survivors\' memory stayed bounded (last ≤ 3 × first + 64 MiB)', checked: sampled, anomalies: grown },
  ];
}

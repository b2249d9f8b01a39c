import type { HistoryLine } from '../history.js';
import type { Verdict } from '../workload.js';
import { readSteps } from './upgrade-history.js';

/**
 * The vault's writer of values under value keys (docs/vault.md "Destroyed") judged from
 * a rolling upgrade's samples (chaos/value-keys-sampler.ts): where the old build writes none (no
 * key appeared in the phase on it alone), none may appear while a vault replica of the old build
 * lives, past the moment the others can have heard it (SLACK_MS after its start); and some must
 * appear while only replicas of this build run (the writer's gate opened). A build without the
 * bucket (0.2.0 as the old one) yields no samples before the upgrade: only the second holds then.
 */
const SLACK_MS = 3_000;

export function checkValueKeys(lines: readonly HistoryLine[]): Verdict[] {
  const samples = lines.filter((l) => l.kind === 'vault' && l.op === 'value keys').map((l) => ({ t: l.t, build: String(l.build), written: Number(l.written) }));
  if (samples.length === 0) return [];
  const start = lines.find((l) => l.kind === 'run' && l.op === 'start')?.t ?? lines[0]?.t ?? 0;
  const end = lines[lines.length - 1]?.t ?? start;
  const steps = readSteps(lines).filter((s) => s.roles === 'vault');
  // When each vault replica ran the old build: from the run's start to its upgrade, from its rollback's ready to the end.
  const oldVaults: Array<{ target: string; from: number; to: number }> = [];
  for (const target of new Set(steps.map((s) => s.target))) {
    const up = steps.find((s) => s.target === target && s.roll === 'upgrade');
    const back = steps.find((s) => s.target === target && s.roll === 'rollback');
    oldVaults.push({ target, from: start, to: up?.startedAt ?? end });
    if (back) oldVaults.push({ target, from: back.readyAt ?? back.startedAt, to: end });
  }
  const grew: Array<{ from: number; to: number; build: string; by: number }> = [];
  for (let i = 1; i < samples.length; i++) if (samples[i].written > samples[i - 1].written) grew.push({ from: samples[i - 1].t, to: samples[i].t, build: samples[i].build, by: samples[i].written - samples[i - 1].written });
  const oldWrites = grew.some((g) => g.build === 'old');
  const anomalies: string[] = [];
  if (!oldWrites) {
    for (const g of grew) {
      const living = oldVaults.find((v) => g.from >= v.from + SLACK_MS && g.to <= v.to);
      if (living) anomalies.push(`${g.by} value key(s) written between +${((g.from - start) / 1000).toFixed(1)} s and +${((g.to - start) / 1000).toFixed(1)} s while ${living.target} ran the old build (up since +${((living.from - start) / 1000).toFixed(1)} s)`);
    }
  }
  const inNew = grew.filter((g) => g.build === 'new').reduce((n, g) => n + g.by, 0);
  return [
    {
      check: oldWrites ? 'value keys: (info) the old build writes value keys itself: not judged' : 'value keys: none written while a vault replica of the old build lived',
      checked: grew.length,
      anomalies,
    },
    {
      check: 'value keys: written once every vault replica ran this build (the writer\'s gate opened)',
      checked: samples.filter((s) => s.build === 'new').length,
      anomalies: inNew > 0 ? [] : ['no value key was written in the phase on this build alone'],
    },
  ];
}

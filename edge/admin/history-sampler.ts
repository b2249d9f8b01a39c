import { describeProcesses } from '../../lib/runtime/presence.js';
import type { AdminDeps } from './answers.js';
import { MetricsHistory, type HistorySample, type MetricJson } from './metrics-history.js';

/** The figures sampled so far (the console's charts; live-api.ts serves them). */
export interface SampledHistory {
  everyMs: number;
  samples(): HistorySample[];
}

/** No history: an admin listener without the console samples nothing. */
export const NO_HISTORY: SampledHistory = { everyMs: 0, samples: () => [] };

/**
 * The console's short history of figures (docs/operations.md "Console"), sampled every `sampleMs`
 * from now on. A table built only to be read (the reference's test) has no sampling period: nothing
 * to sample.
 */
export function sampledHistory(deps: Pick<AdminDeps, 'bus' | 'peers'>, sampleMs: number): SampledHistory {
  const history = new MetricsHistory(180);
  if (sampleMs > 0) historySampler(deps, history, sampleMs).start();
  return { everyMs: sampleMs, samples: () => history.all() };
}

/**
 * Samples every process's figures every `everyMs` from the admin process's start, so the charts
 * hold the last minutes at sign-in (the history keeps a bounded number of samples; one sample is
 * one report of each process, as `pier status` asks).
 */
function historySampler(deps: Pick<AdminDeps, 'bus' | 'peers'>, history: MetricsHistory, everyMs: number) {
  let timer: NodeJS.Timeout | null = null;
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const reports = await describeProcesses(deps.bus, 300, deps.peers as Parameters<typeof describeProcesses>[2]);
      history.add(Date.now(), reports.map((r) => r.metrics as unknown as MetricJson[]));
    } catch {
      // A missed sample is a gap in the chart, nothing more.
    } finally {
      busy = false;
    }
  };
  return {
    start() {
      if (timer) return;
      timer = setInterval(() => void tick(), everyMs);
      timer.unref();
      void tick();
    },
  };
}

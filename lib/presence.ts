import type { Bus, Subscription } from '../bus/bus.js';
import { answerOn, gatherOn } from '../bus/channel.js';
import { processChannels, processSubjects, type ProcessInfo, type ProcessReport } from '../bus/subjects.js';
import type { Metrics } from './metrics.js';

export type { ProcessReport };

/**
 * Makes this process answer `pier.process.describe`. `counters` is read at each question so
 * roles can contribute live numbers (connections, uploads in progress) without a push.
 */
export function announceProcess(bus: Bus, full: ProcessInfo, metrics: Metrics, counters: () => Record<string, number>): Subscription {
  return answerOn(bus, processChannels.describe, processSubjects.describe, async () => ({ info: full, counters: counters(), metrics: await metrics.registry.getMetricsAsJSON() }));
}

/** Asks every process and collects the answers that arrive within `waitMs` (a garbled one is a process missing, not a failure). */
export function describeProcesses(bus: Bus, waitMs: number): Promise<ProcessReport[]> {
  return gatherOn(bus, processChannels.describe, processSubjects.describe, {}, { timeoutMs: waitMs, stallMs: waitMs });
}

import { at } from '../../bus/exchange.js';
import { gather, serve } from '../../bus/verbs.js';
import type { Bus, Subscription } from '../../bus/bus.js';
import { processChannels, processSubjects, type EndpointStats, type ProcessInfo, type ProcessReport } from '../../bus/subjects.js';
import type { Metrics } from './metrics.js';
import type { Peers } from './peers.js';

/** What a report's signature covers (`endpoints` when the report has them: older processes send none). */
const signed = (r: Pick<ProcessReport, 'info' | 'counters' | 'metrics' | 'endpoints'>) =>
  Buffer.from(JSON.stringify(r.endpoints === undefined ? [r.info, r.counters, r.metrics] : [r.info, r.counters, r.metrics, r.endpoints]));

export type { ProcessReport };

/**
 * Makes this process answer `pier.process.describe`. `counters` is read at each question so
 * roles can contribute live numbers (connections, uploads in progress) without a push.
 */
export function announceProcess(
  bus: Bus,
  full: ProcessInfo,
  metrics: Metrics,
  counters: () => Record<string, number>,
  peers: Pick<Peers, 'sign'>,
  endpoints: () => Record<string, EndpointStats> = () => ({}),
): Subscription {
  return serve(bus, at(processChannels.describe, processSubjects.describe), async () => {
    // A copy: prom-client's JSON shares its live value objects, which a request finishing in the
    // microtasks between this signature and the encoding of the answer would change (the report
    // then failed its signature, and /metrics came back empty, under load).
    const report = structuredClone({ info: full, counters: counters(), metrics: await metrics.registry.getMetricsAsJSON(), endpoints: endpoints() });
    return { ...report, sig: peers.sign(signed(report)) };
  });
}

/**
 * Asks every process and keeps the answers that arrive within `waitMs` signed by a live process of
 * the directory (any identity may answer a describe: an unsigned or forged report, or one with a
 * negative counter, is a process missing, not a figure summed into status and /metrics).
 */
export async function describeProcesses(bus: Bus, waitMs: number, peers: Pick<Peers, 'signedBy'>): Promise<ProcessReport[]> {
  // Answers stop being waited for `waitMs` after the last one came; the first may take longer (a
  // loaded host, a process collecting its metrics): up to 5 s, not one bound for both.
  const reports = await gather(bus, at(processChannels.describe, processSubjects.describe), {}, { timeoutMs: Math.max(5_000, 5 * waitMs), stallMs: waitMs });
  return reports.filter(
    (r) => typeof r.sig === 'string' && typeof r.info?.id === 'string' && Object.values(r.counters).every((v) => typeof v === 'number' && v >= 0) && peers.signedBy(r.info.id, signed(r), r.sig),
  );
}

import { at } from '../../bus/exchange.js';
import { gather, serve } from '../../bus/verbs.js';
import type { Bus, Subscription } from '../../bus/bus.js';
import { BUS_ROLES } from '../../bus/permissions.js';
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
 * Asks every process and keeps the answers signed by a live process of the directory (any identity
 * may answer a describe: an unsigned or forged report, or one with a negative counter, is a process
 * missing, not a figure summed into status and /metrics). It waits for as many answers as the
 * heartbeats count live processes, up to 3 s (a loaded host answers late: a stall of `waitMs` after
 * the last answer cut off the slow ones, and `pier status` listed fewer roles than it said ran);
 * when no heartbeat was heard yet, until answers stall `waitMs` after the last one, up to 5 s.
 */
export async function describeProcesses(bus: Bus, waitMs: number, peers: Pick<Peers, 'signedBy' | 'alive'>): Promise<ProcessReport[]> {
  const live = new Set(BUS_ROLES.flatMap((role) => peers.alive(role).map((p) => p.id))).size;
  const reports = await gather(
    bus,
    at(processChannels.describe, processSubjects.describe),
    {},
    live > 0 ? { timeoutMs: Math.max(3_000, 5 * waitMs), stallMs: waitMs, expected: live } : { timeoutMs: Math.max(5_000, 5 * waitMs), stallMs: waitMs },
  );
  return reports.filter(
    (r) => typeof r.sig === 'string' && typeof r.info?.id === 'string' && Object.values(r.counters).every((v) => typeof v === 'number' && v >= 0) && peers.signedBy(r.info.id, signed(r), r.sig),
  );
}

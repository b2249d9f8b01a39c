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
 * heartbeats count live processes, up to 1.5 s (a loaded host answers late: a stall of `waitMs` after
 * the last answer cut off the slow ones, and `pier status` listed fewer roles than it said ran).
 * When that many came but a live process is not among them (one not yet counted answered in its
 * place: a process just started), it asks again for as many as both together, and keeps both; with
 * no heartbeat heard yet, it waits until answers stall `waitMs` after the last one, up to 5 s.
 */
export async function describeProcesses(bus: Bus, waitMs: number, peers: Pick<Peers, 'signedBy' | 'alive'>): Promise<ProcessReport[]> {
  const liveIds = new Set(BUS_ROLES.flatMap((role) => peers.alive(role).map((p) => p.id)));
  const ask = (options: { timeoutMs: number; stallMs: number; expected?: number }) => gather(bus, at(processChannels.describe, processSubjects.describe), {}, options).then((rs) => rs.filter(believed(peers)));
  const stalled = { timeoutMs: Math.max(5_000, 5 * waitMs), stallMs: waitMs };
  const first = await ask(liveIds.size > 0 ? { timeoutMs: Math.max(1_500, 5 * waitMs), stallMs: waitMs, expected: liveIds.size } : stalled);
  const answered = new Set(first.map((r) => r.info.id));
  if (liveIds.size === 0 || [...liveIds].every((id) => answered.has(id))) return first;
  const byId = new Map(first.map((r) => [r.info.id, r]));
  const everyone = new Set([...liveIds, ...answered]).size;
  for (const r of await ask({ timeoutMs: Math.max(1_500, 5 * waitMs), stallMs: waitMs, expected: everyone })) if (!byId.has(r.info.id)) byId.set(r.info.id, r);
  return [...byId.values()];
}

const believed = (peers: Pick<Peers, 'signedBy'>) => (r: ProcessReport & { sig?: unknown }) =>
  typeof r.sig === 'string' && typeof r.info?.id === 'string' && Object.values(r.counters).every((v) => typeof v === 'number' && v >= 0) && peers.signedBy(r.info.id, signed(r), r.sig);

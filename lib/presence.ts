import type { Bus, Subscription } from '../bus/bus.js';
import { decode, encode } from '../bus/codec.js';
import { processSubjects, type ProcessInfo } from '../bus/subjects.js';
import type { Metrics } from './metrics.js';

/** What a process tells about itself when asked; the counters are summed by `pier status`. */
export interface ProcessReport {
  info: ProcessInfo;
  counters: Record<string, number>;
  /** prom-client's JSON form, so the admin listener can merge processes into one /metrics. */
  metrics: unknown[];
}

/**
 * Makes this process answer `pier.process.describe`. `counters` is read at each question so
 * roles can contribute live numbers (connections, uploads in progress) without a push.
 */
export function announceProcess(bus: Bus, full: ProcessInfo, metrics: Metrics, counters: () => Record<string, number>): Subscription {
  return bus.subscribe(processSubjects.describe, (msg) => {
    if (!msg.reply) return;
    const reply = msg.reply;
    void metrics.registry.getMetricsAsJSON().then((json) => {
      const report: ProcessReport = { info: full, counters: counters(), metrics: json };
      bus.publish(reply, encode(report));
    });
  });
}

/** Asks every process and collects the answers that arrive within `waitMs`. */
export async function describeProcesses(bus: Bus, waitMs: number): Promise<ProcessReport[]> {
  const inbox = bus.inbox();
  const reports: ProcessReport[] = [];
  const sub = bus.subscribe(inbox, (msg) => {
    try {
      reports.push(decode<ProcessReport>(msg.data));
    } catch {
      // A garbled answer is one process missing from the list, not a failed request.
    }
  });
  try {
    await bus.flush();
    bus.publish(processSubjects.describe, encode({}), { reply: inbox });
    await new Promise((r) => setTimeout(r, waitMs));
  } finally {
    sub.unsubscribe();
  }
  return reports;
}

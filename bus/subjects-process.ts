import { channel } from './channel.js';
import { event } from './rpc.js';

/** What every Pier process (whatever its roles) says about itself. */
export interface ProcessInfo {
  id: string;
  /** Dot-free id used inside subjects (`pier.gw.edge.<busId>`, `pier.cb.deliver.<busId>`). */
  busId: string;
  roles: string[];
  pid: number;
  host: string;
  startedAt: string;
}

/** What a process tells about itself when asked; the counters are summed by `pier status`. */
export interface ProcessReport {
  info: ProcessInfo;
  counters: Record<string, number>;
  /** prom-client's JSON form, so the admin listener can merge processes into one /metrics. */
  metrics: unknown[];
}

/**
 * Scatter-gather: every process answers (no queue group) with its report. The admin listener sums
 * them into one /metrics and one `pier status`.
 */
export const processChannels = {
  describe: channel<Record<string, never>, ProcessReport>({}, { info: 'object', counters: 'object', metrics: 'array' }),
};

export const processSubjects = {
  describe: 'pier.process.describe',
  /** Every process, every `PIER_HEARTBEAT_MS`: who is alive, with which roles (lib/peers.ts). */
  heartbeat: event<ProcessInfo>('pier.process.heartbeat', {
    id: { type: 'string', max: 256 },
    busId: { type: 'string', pattern: /^[0-9a-f]{12}$/ },
    roles: { type: 'array', max: 16, items: { type: 'string', max: 32 } },
    pid: { type: 'number', integer: true },
    host: { type: 'string', max: 256 },
    startedAt: { type: 'string', max: 64 },
  }),
};

import type { EventSubject } from './rpc.js';

/** What every Pier process (whatever its roles) says about itself. */
export interface ProcessInfo {
  id: string;
  roles: string[];
  pid: number;
  host: string;
  startedAt: string;
}

export const processSubjects = {
  /**
   * Scatter-gather: every process answers (no queue group) with {info, metrics}, where metrics is
   * prom-client's JSON. The admin listener sums them into one /metrics and one `pier status`.
   */
  describe: 'pier.process.describe',
  /** Announced at start and every few seconds; lets `pier status` see replicas. */
  heartbeat: { subject: 'pier.process.heartbeat' } as EventSubject<ProcessInfo>,
};

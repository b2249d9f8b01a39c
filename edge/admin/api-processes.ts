// The admin API's answers of the processes (`pier status`): types only. edge/admin/api.ts declares
// the route that answers them and re-exports them, so callers keep one import.

export interface EndpointRow {
  subject: string;
  requests: number;
  errors: number;
  processingMs: number;
  averageMs: number;
  /** The last error answered, a client's refusal (4xx) or a fault (5xx). */
  lastError: { code: string; message: string; at: string } | null;
  /** Answers that were the process's own failure (5xx); absent from a process older than the field. */
  faults?: number;
  lastFault?: { code: string; message: string; at: string } | null;
}

export interface ReplicaRow {
  id: string;
  /** Dot-free id used inside subjects and connection ids. */
  busId: string;
  roles: string[];
  pid: number;
  host: string;
  startedAt: string;
  version?: string;
  /** The wire formats it speaks (docs/operations.md "Upgrading"); a process before 0.2.0 says none: 1 to 1. */
  wire: { speaks: number; oldest: number };
  counters: Record<string, number>;
  /** Its actor endpoints' figures by `<role>.<endpoint>`; absent for a process that serves none. */
  endpoints?: Record<string, EndpointRow>;
}

/** A live process that shares no wire format with the admin process (docs/operations.md "Upgrading"). */
export interface MismatchRow {
  id: string;
  roles: string[];
  version: string | null;
  /** The wire formats it speaks (1 to 1 for a process that does not say). */
  wire: { speaks: number; oldest: number };
}

export interface Status {
  roles: string[];
  /** Processes outside this admin's wire window: nothing is routed to them (a rolling upgrade skipped a release). */
  mismatched: MismatchRow[];
  /** The wire formats this admin process speaks. */
  wire: { speaks: number; oldest: number };
  /** Roles no live process runs: their requests answer 503 until one starts. */
  missingRoles: string[];
  /** @deprecated 0.1 name of `missingRoles`, removed in 0.3. */
  missing_roles: string[];
  bus: { kind: string; connected: boolean };
  registry: { revision: number; fresh: boolean };
  replicas: ReplicaRow[];
  connections: number;
  uploads: number;
}

import { AggregatorRegistry } from 'prom-client';
import type { Bus } from '../../bus/bus.js';
import { OLDEST_WIRE_VERSION, WIRE_VERSION } from '../../bus/envelope.js';
import { BUS_ROLES } from '../../bus/permissions.js';
import { FIRST_WIRE, type EndpointStats, type ProcessInfo } from '../../bus/subjects.js';
import { describeProcesses } from '../../lib/runtime/presence.js';
import type { Peers } from '../../lib/runtime/peers.js';
import { missingRoles } from '../http/health.js';
import type { HttpReply } from '../http/http.js';
import type { ReplicaRow } from './api.js';
import type { AdminDeps, AnswerHandlers } from './answers.js';

/** The admin route of the processes (docs/protocol.md "Admin API"): `pier status`. */
export type StatusRouteName = 'status';

export function statusAnswers(deps: AdminDeps): AnswerHandlers<StatusRouteName> {
  return {
    status: async () => {
      const reports = await describeProcesses(deps.bus, 300, deps.peers);
      const sum = (key: string) => reports.reduce((n, r) => n + (r.counters[key] ?? 0), 0);
      const missing = missingRoles(deps.peers);
      return {
        // Roles with a live process: the heartbeats' word (as `missingRoles`), and any a report names.
        roles: [...new Set([...BUS_ROLES.filter((role) => !missing.includes(role)), ...reports.flatMap((r) => r.info.roles)])].sort(),
        mismatched: deps.peers.mismatched().map((p) => ({ id: p.id, roles: p.roles, version: p.version ?? null, wire: p.wire ?? FIRST_WIRE })),
        wire: { speaks: WIRE_VERSION, oldest: OLDEST_WIRE_VERSION },
        missingRoles: missing,
        missing_roles: missing,
        bus: { kind: deps.bus.kind, connected: deps.bus.isConnected() },
        registry: { revision: deps.cache.currentRevision(), fresh: deps.cache.isFresh() },
        // Each process as it announces itself, with its actor endpoints' figures (requests, errors, time, last error).
        replicas: reports.map((r) => replicaRow(r.info, r.counters, r.endpoints)).sort((a, b) => a.id.localeCompare(b.id)),
        connections: sum('connections'),
        uploads: sum('uploads'),
      };
    },
  };
}

function replicaRow(info: ProcessInfo, counters: Record<string, number>, endpoints: Record<string, EndpointStats> | undefined): ReplicaRow {
  const row: ReplicaRow = { id: info.id, busId: info.busId, roles: info.roles, pid: info.pid, host: info.host, startedAt: info.startedAt, ...(info.version === undefined ? {} : { version: info.version }), wire: info.wire ?? FIRST_WIRE, counters };
  return endpoints && Object.keys(endpoints).length > 0 ? { ...row, endpoints } : row;
}

/** Prometheus text for every process on the bus, merged (each series keeps its `instance` label). */
export async function clusterMetrics(bus: Bus, peers: Pick<Peers, 'signedBy' | 'alive'>): Promise<HttpReply> {
  const reports = await describeProcesses(bus, 300, peers);
  const merged = AggregatorRegistry.aggregate(reports.map((r) => r.metrics) as Parameters<typeof AggregatorRegistry.aggregate>[0]);
  return { status: 200, text: await merged.metrics(), headers: { 'content-type': merged.contentType } };
}

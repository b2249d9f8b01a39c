import type { Bus } from '../../bus/bus.js';
import { BUS_ROLES } from '../../bus/permissions.js';
import type { Peers } from '../../lib/runtime/peers.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import type { HttpReply } from './http.js';

/** `/healthz`: the process answers. */
export function healthz(): HttpReply {
  return { status: 200, json: { code: 0, message: 'ok' } };
}

/** The roles no live process runs, as the roles' own heartbeats tell (lib/runtime/peers.ts). */
export function missingRoles(peers: Pick<Peers, 'alive'>): string[] {
  return BUS_ROLES.filter((role) => peers.alive(role).length === 0);
}

/** Whether a stopping process has begun draining: its /readyz says so before its listeners close. */
export interface Drain {
  draining: boolean;
  /** HTTP requests being answered by the edge's listeners (edge/http/mount-routes.ts). */
  inFlight?: { count: number };
}

/**
 * `/readyz`: the bus is connected and the registry (which every listener needs) is heard. On the
 * admin listener (`peers` given) also every role of the cluster has a live process and none is
 * outside the wire window: an operator's probe of the whole, naming what is missing or mismatched.
 */
export function readyz(bus: Bus, cache: RegistryCache, peers?: Pick<Peers, 'alive' | 'mismatched'>, drain?: Drain): HttpReply {
  const problems: string[] = [];
  if (drain?.draining) problems.push('draining: this process is stopping');
  if (!bus.isConnected()) problems.push('bus disconnected');
  if (!cache.isFresh()) problems.push('registry not reachable');
  for (const role of peers ? missingRoles(peers) : []) problems.push(`no ${role} replica is running`);
  for (const p of peers?.mismatched() ?? []) problems.push(`${p.roles.join(',')} process ${p.id} (Pier ${p.version ?? '?'}) shares no wire format with this admin`);
  return problems.length === 0
    ? { status: 200, json: { code: 0, message: 'ready' } }
    : { status: 503, json: { code: 503, message: `not ready: ${problems.join(', ')}` } };
}

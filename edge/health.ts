import type { Bus } from '../bus/bus.js';
import type { RegistryCache } from '../lib/registry-cache.js';
import type { HttpReply } from './http.js';

/** `/healthz`: the process answers. */
export function healthz(): HttpReply {
  return { status: 200, json: { code: 0, message: 'ok' } };
}

/** `/readyz`: the bus is connected and the registry (which every listener needs) is heard. */
export function readyz(bus: Bus, cache: RegistryCache): HttpReply {
  const problems: string[] = [];
  if (!bus.isConnected()) problems.push('bus disconnected');
  if (!cache.isFresh()) problems.push('registry not reachable');
  return problems.length === 0
    ? { status: 200, json: { code: 0, message: 'ready' } }
    : { status: 503, json: { code: 503, message: `not ready: ${problems.join(', ')}` } };
}

import { createServer, type Server } from 'node:http';
import type { Bus } from '../bus/bus.js';
import type { Metrics } from '../lib/runtime/metrics.js';
import { adminHostAllowed } from '../edge/identity/host.js';
import type { RegistryCache } from '../lib/state/registry-cache.js';

/**
 * `PIER_PROBE_PORT`: `/healthz`, `/readyz` and `/metrics` for any process, an actor-only one too
 * (the edge's listeners answer probes already; a vault or upload replica has none). Plain
 * node:http: three fixed answers, no body read, nothing else served.
 */
export async function startProbeServer(options: { host: string; port: number; bus: Bus; cache: RegistryCache; metrics: Metrics; adminHosts: readonly string[] }): Promise<{ port: number; stop(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return json(405, { code: 405, message: 'method not allowed' });
    if (path === '/healthz') return json(200, { code: 0, message: 'ok' });
    if (path === '/readyz') {
      const problems = [...(options.bus.isConnected() ? [] : ['bus disconnected']), ...(options.cache.isFresh() ? [] : ['registry not reachable'])];
      return problems.length === 0 ? json(200, { code: 0, message: 'ready' }) : json(503, { code: 503, message: `not ready: ${problems.join(', ')}` });
    }
    if (path === '/metrics') {
      // Scraped by address: a page re-bound by DNS to this host names itself, and reads nothing.
      if (!adminHostAllowed(req.headers.host, options.adminHosts)) return json(403, { code: 403, message: 'Host: this listener answers only loopback names, IP addresses and the names in PIER_ADMIN_HOSTS' });
      void options.metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': options.metrics.registry.contentType });
          res.end(text);
        },
        () => json(500, { code: 500, message: 'metrics unavailable' }),
      );
      return;
    }
    json(404, { code: 404, message: 'not found' });
  });
  server.requestTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as { port: number }).port,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

import uWS from 'uWebSockets.js';
import type { RoleContext } from '../lib/runtime.js';
import { ConfigError, type Ports } from '../lib/config.js';
import { mountRoutes } from './http.js';
import { Gateway } from './gateway.js';
import { LISTENERS, routeTable, type ListenerName } from './routes.js';

export interface RunningEdge {
  /** Ports actually bound (differs from the configuration when it asked for port 0). */
  ports: Ports;
  stop(): Promise<void>;
}

/** LIBUS_LISTEN_EXCLUSIVE_PORT: a port already taken is an error, not silently shared. */
const EXCLUSIVE = 1;

function listen(app: uWS.TemplatedApp, host: string, port: number, name: string): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    (app as any).listen(host, port, EXCLUSIVE, (socket: uWS.us_listen_socket | false) => {
      if (socket) resolve(socket);
      else reject(new ConfigError(`${name} listener: cannot listen on ${host}:${port} (port taken or address not available)`));
    });
  });
}

/**
 * The edge: one uWS app per listener of contract section 8. The admin listener binds loopback
 * only, whatever the bind host.
 */
export async function startEdge(ctx: RoleContext): Promise<RunningEdge> {
  const ports = { ...ctx.config.ports };
  const table = routeTable({
    bus: ctx.bus,
    cache: ctx.cache,
    adminToken: ctx.config.adminToken,
    roles: ctx.config.roles,
    adminBodyBytes: ctx.config.limits.adminBodyBytes,
    providerBodyBytes: ctx.config.provider.bodyBytes,
    providerTimeoutMs: ctx.config.provider.timeoutMs,
    vaultName: ctx.config.vaultName,
    peers: ctx.peers,
    domain: ctx.config.domain,
    chunkBytes: ctx.config.upload.chunkBytes,
    sidecarApp: ctx.config.sidecarApp,
    now: ctx.now,
    systemServerUrl: () => ctx.config.systemServerUrl ?? `http://127.0.0.1:${ports.system}`,
  });
  const sockets: uWS.us_listen_socket[] = [];
  const gateway = new Gateway(ctx);
  try {
    for (const name of LISTENERS) {
      const app = uWS.App();
      if (name === 'public') gateway.attach(app);
      mountRoutes(app, table[name], { listener: name, log: ctx.log, metrics: ctx.metrics });
      // Admin is loopback only; so is a sidecar's local API (it lives in the app's network namespace).
      const host = name === 'admin' || (name === 'local' && ctx.config.sidecarApp) ? '127.0.0.1' : ctx.config.bindHost;
      const socket = await listen(app, host, ctx.config.ports[name as ListenerName], name);
      sockets.push(socket);
      ports[name] = uWS.us_socket_local_port(socket);
    }
  } catch (err) {
    for (const s of sockets) uWS.us_listen_socket_close(s);
    throw err;
  }
  gateway.start();
  ctx.counters.set('connections', () => gateway.count());
  ctx.log.info({ ports }, 'edge listening');
  return {
    ports,
    async stop() {
      // Stop taking new work, then close the connections and hand over their close events.
      for (const s of sockets) uWS.us_listen_socket_close(s);
      await gateway.stop();
    },
  };
}

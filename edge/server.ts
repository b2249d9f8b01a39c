import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import uWS from 'uWebSockets.js';
import type { RoleContext } from '../lib/runtime/runtime.js';
import { ConfigError, type Config, type Ports } from '../lib/config/config.js';
import { mountRoutes } from './http/mount-routes.js';
import { adminHostAllowed } from './identity/host.js';
import { Gateway } from './gateway/gateway.js';
import { HistoryClient } from './gateway/history/history-client.js';
import { routeTable, type ListenerName } from './routes.js';
import { PassedGates } from './identity/call-gate.js';
import { TlsServing } from './http/tls.js';
import type { Drain } from './http/health.js';

export interface RunningEdge {
  /** Ports actually bound (differs from the configuration when it asked for port 0). */
  ports: Partial<Ports>;
  stop(): Promise<void>;
}

/**
 * Whether some socket already listens on `port`. uWS binds with SO_REUSEPORT, so a second Pier on
 * the same port would silently share it; its exclusive mode, on the other hand, refuses to bind
 * while connections of a crashed Pier linger (FIN-WAIT), so a restart would fail, and so would a
 * plain bind probe. The kernel's socket table tells listening sockets apart from lingering ones.
 */
async function socketsOn(port: number): Promise<{ listening: boolean; lingering: boolean } | null> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const found = { listening: false, lingering: false };
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => null);
    if (text === null) return null;
    // columns: sl local_address rem_address st ...; LISTEN is state 0A
    for (const line of text.split('\n')) {
      const cols = line.trim().split(/\s+/);
      if (!cols[1]?.endsWith(`:${hex}`)) continue;
      if (cols[3] === '0A') found.listening = true;
      else found.lingering = true;
    }
  }
  return found;
}

async function someoneListens(port: number): Promise<boolean> {
  if (port === 0) return false;
  const sockets = await socketsOn(port);
  return sockets === null ? portBusyByProbe(port) : sockets.listening;
}

/** Elsewhere than Linux: a plain bind tells (wrongly refusing while old connections linger). */
function portBusyByProbe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, () => probe.close(() => resolve(false)));
  });
}

async function listen(app: uWS.TemplatedApp, host: string, port: number, name: string): Promise<uWS.us_listen_socket> {
  const taken = () => new ConfigError(`${name} listener: cannot listen on ${host}:${port} (port taken or address not available)`);
  if (await someoneListens(port)) throw taken();
  const attempt = () => new Promise<uWS.us_listen_socket | false>((resolve) => app.listen(host, port, resolve));
  // Nobody listens, yet the bind may fail for up to a minute: connections of a Pier that died
  // linger in TIME_WAIT, and uWS does not set SO_REUSEADDR. Wait them out rather than give up.
  const deadline = Date.now() + 75_000;
  for (let warned = false; ; ) {
    const socket = await attempt();
    if (socket) return socket;
    if (port === 0 || Date.now() > deadline || !(await socketsOn(port))?.lingering) throw taken();
    if (!warned) {
      warned = true;
      process.stderr.write(`pier: ${name} listener: port ${port} is still held by connections of a previous process (TIME_WAIT); retrying for up to a minute\n`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

function routesFor(ctx: RoleContext, withConsole = false, drain?: Drain, history: HistoryClient | null = null) {
  return routeTable({
    history,
    ...(drain ? { drain } : {}),
    ...(withConsole ? { console: { sessionMs: ctx.config.console.sessionMs, sampleMs: ctx.config.console.sampleMs, now: () => Date.now() } } : {}),
    bus: ctx.bus,
    cache: ctx.cache,
    adminToken: ctx.config.adminToken,
    roles: ctx.config.roles,
    log: ctx.log,
    adminBodyBytes: ctx.config.limits.adminBodyBytes,
    providerBodyBytes: ctx.config.provider.bodyBytes,
    providerTimeoutMs: ctx.config.provider.timeoutMs,
    vaultName: ctx.config.vaultName,
    gates: new PassedGates(),
    verified: new PassedGates(),
    peers: ctx.peers,
    domain: ctx.config.domain,
    chunkBytes: ctx.config.upload.chunkBytes,
    idleMs: ctx.config.upload.idleMs,
    sidecarApp: ctx.config.sidecarApp,
    now: ctx.now,
    // The system listener may be this process's (bound to a free port) or another's (configured).
    systemServer: () => ctx.config.systemServer ?? `127.0.0.1:${ctx.boundPorts.system ?? ctx.config.ports.system}`,
  });
}

/** Binds the listeners `names`, each a uWS app with its routes; returns their sockets, ports filled in. */
async function bindListeners(
  ctx: RoleContext,
  names: readonly ListenerName[],
  ports: Partial<Config['ports']>,
  setUp: (name: ListenerName, app: uWS.TemplatedApp) => void,
  tls: TlsServing | null = null,
  drain?: Drain,
  history: HistoryClient | null = null,
): Promise<uWS.us_listen_socket[]> {
  const table = routesFor(ctx, names.includes('admin'), drain, history);
  const sockets: uWS.us_listen_socket[] = [];
  try {
    for (const name of names) {
      const secure = tls?.covers(name) === true;
      const app = secure ? tls!.createApp() : uWS.App();
      const routes = (a: uWS.TemplatedApp) => {
        setUp(name, a);
        const hostAllowed = name === 'admin' ? (host: string | undefined) => adminHostAllowed(host, ctx.config.adminHosts) : undefined;
        mountRoutes(a, table[name], { listener: name, log: ctx.log, metrics: ctx.metrics, ...(hostAllowed ? { hostAllowed } : {}), ...(drain ? { closing: () => drain.draining, inFlight: drain.inFlight } : {}) });
      };
      routes(app);
      // With TLS, every SNI name gets the same routes (uWS routes per SNI domain).
      if (secure) tls!.serveNames(app, routes);
      // Admin is loopback only; so is a sidecar's local API (it lives in the app's network namespace).
      const host = name === 'admin' || (name === 'local' && ctx.config.sidecarApp) ? '127.0.0.1' : ctx.config.bindHost;
      const socket = await listen(app, host, ctx.config.ports[name], name);
      sockets.push(socket);
      ports[name] = uWS.us_socket_local_port(socket);
      ctx.boundPorts[name] = ports[name];
      ctx.ownPorts.add(ports[name]!);
    }
  } catch (err) {
    for (const s of sockets) uWS.us_listen_socket_close(s);
    throw err;
  }
  return sockets;
}

/**
 * The edge: the browser- and app-facing listeners of contract section 8 (public, system, local,
 * upload). It holds no admin power: the admin listener is the `admin` role's. `keepsHistory`: its
 * history actor runs (cli/start.ts).
 */
export async function startEdge(ctx: RoleContext, keepsHistory = false): Promise<RunningEdge> {
  const ports: Partial<Config['ports']> = {};
  // Whether it keeps history was decided (and what keeps it from it said) as its history actor
  // started (edge/gateway/history-off.ts): the store is that actor's, asked over the bus.
  const history = keepsHistory ? new HistoryClient(ctx.bus, ctx.config.gateway.history.ceilings) : null;
  const gateway = new Gateway(ctx, history);
  const tls = ctx.config.tls ? new TlsServing(ctx.config.tls, ctx.log, ctx.metrics) : null;
  const drain: Drain = { draining: false, inFlight: { count: 0 } };
  const sockets = await bindListeners(
    ctx,
    ['public', 'system', 'local', 'upload'],
    ports,
    (name, app) => {
      if (name === 'public') gateway.attach(app);
    },
    tls,
    drain,
    history,
  );
  tls?.watchForChanges();
  gateway.start();
  ctx.counters.set('connections', () => gateway.count());
  ctx.log.info({ ports, tls: tls ? tls.settings.listeners : [] }, 'edge listening');
  return {
    ports,
    async stop() {
      // Drain (docs/operations.md "Upgrading"): /readyz answers 503 for PIER_DRAIN_MS, so a load
      // balancer sends new connections elsewhere while this edge still serves what it has.
      if (ctx.config.drainMs > 0) {
        drain.draining = true;
        ctx.log.info({ drainMs: ctx.config.drainMs }, 'edge draining: /readyz answers 503, the listeners close after');
        await new Promise((r) => setTimeout(r, ctx.config.drainMs));
      }
      // Stop taking new work, then close the connections (1001: clients reconnect elsewhere) and hand over their close events.
      tls?.stop();
      for (const s of sockets) uWS.us_listen_socket_close(s);
      // Answers still being made are finished before the bus goes (each closes its connection):
      // a request taken is answered, not cut by the exit. Bounded by what is left of the stop.
      drain.draining = true;
      const until = Date.now() + Math.max(0, ctx.config.stopTimeoutMs - ctx.config.drainMs - 2_000);
      while (drain.inFlight!.count > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      if (drain.inFlight!.count > 0) ctx.log.warn({ inFlight: drain.inFlight!.count }, 'edge stopping with HTTP requests still unanswered');
      await gateway.stop();
    },
  };
}

/** The operator's listener (loopback only): the CLI's admin API and the cluster's /metrics. */
export async function startAdmin(ctx: RoleContext): Promise<RunningEdge> {
  const ports: Partial<Config['ports']> = {};
  const sockets = await bindListeners(ctx, ['admin'], ports, () => undefined);
  ctx.log.info({ ports }, 'admin listening');
  return {
    ports,
    async stop() {
      for (const s of sockets) uWS.us_listen_socket_close(s);
    },
  };
}

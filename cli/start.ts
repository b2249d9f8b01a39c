import { OLDEST_WIRE_VERSION, onRefusal, WIRE_VERSION } from '../bus/envelope.js';
import type { Bus } from '../bus/bus.js';
import { gcThreadsHint } from '../lib/runtime/gc-threads.js';
import { MemoryBus } from '../bus/bus-memory.js';
import { NatsBus } from '../bus/bus-nats.js';
import { fetchVarz, judgeDurability } from '../lib/state/nats-durability.js';
import { StartWatch } from '../lib/runtime/start-watch.js';
import { keepsHistory } from '../edge/gateway/history-off.js';
import type { Config, Role } from '../lib/config/config.js';
import { GuardedBus } from '../bus/guarded.js';
import { ACTORS, EDGE_ACTORS, permissionsFor } from './roles.js';
import { startActor, type RunningActor } from '../lib/runtime/actor.js';
import { inboxPrefixOf } from '../lib/config/nats-auth.js';
import { createLogger } from '../lib/runtime/log.js';
import { Metrics } from '../lib/runtime/metrics.js';
import { announceProcess } from '../lib/runtime/presence.js';
import { RegistryCache } from '../lib/state/registry-cache.js';
import type { RoleContext, Running } from '../lib/runtime/runtime.js';
import { randomBytes } from 'node:crypto';
import { pierVersion } from '../lib/runtime/version.js';
import { hostname } from 'node:os';
import { Peers } from '../lib/runtime/peers.js';
import { installTracing } from '../lib/trace/install.js';
import { BusKeys } from './bus-keys.js';
import { startProbeServer } from './probe-server.js';
import { makePrivate } from './data-dir.js';
import type { ProcessInfo } from '../bus/subjects.js';
import { refusalLog } from './bus-refusal.js';

export interface StartedProcess {
  config: Config;
  ports: Partial<Config['ports']> | null;
  /** Stops every role within `budgetMs` (PIER_STOP_TIMEOUT_MS by default); what did not finish is logged and left. */
  stop(budgetMs?: number): Promise<void>;
}

interface NamedRunning extends Running {
  name: string;
}

const named = (name: string, r: Running): NamedRunning => ({ name, stop: () => r.stop() });

/** Stops one part within `ms`; logs what it is waiting for when that takes a while, and when it is given up. */
async function stopWithin(r: NamedRunning, ms: number, log: ReturnType<typeof createLogger>): Promise<void> {
  const slow = setTimeout(() => log.info({ waitingFor: r.name }, 'stopping: still waiting'), 1_000);
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    r.stop().then(
      () => 'stopped' as const,
      (err: unknown) => (log.error({ err, part: r.name }, 'stop failed'), 'failed' as const),
    ),
    new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), Math.max(0, ms)))),
  ]);
  clearTimeout(slow);
  clearTimeout(timer);
  if (outcome === 'late') log.warn({ part: r.name }, 'stopping: gave up waiting (PIER_STOP_TIMEOUT_MS)');
}

async function connectBus(config: Config, log: ReturnType<typeof createLogger>, metrics: Metrics, login?: { role: Role; user: string; password: string }): Promise<Bus> {
  const onHandlerError = (err: unknown) => log.error({ err }, 'bus subscriber failed');
  if (!config.natsUrl) return new MemoryBus(onHandlerError, config.freezeShared);
  const { tls } = config.natsAuth;
  const { user, password } = login ?? config.natsAuth;
  return NatsBus.connect({
    url: config.natsUrl,
    name: login ? `pier ${login.role} state ${config.instanceId}` : `pier ${config.roles.join(',')} ${config.instanceId}`,
    ...(user ? { user, password: password! } : {}),
    ...(tls ? { tls: { ...(tls.ca ? { caFile: tls.ca } : {}), ...(tls.cert ? { certFile: tls.cert, keyFile: tls.key! } : {}) } } : {}),
    inboxPrefix: inboxPrefixOf(user),
    onHandlerError,
    onStatus: (event, detail) => log.warn({ event, detail }, 'nats connection status'),
    onPermissionRefusal: (operation, subject) => {
      metrics.busRefusals.inc({ reason: 'permission', subject: subject.split('.').slice(0, 3).join('.') });
      const { level, message } = refusalLog(operation, subject);
      log[level]({ operation, subject, user }, message);
    },
  });
}

/**
 * One connection per role that keeps state on JetStream, logged in to that role's own state account
 * (docs/security.md "The bus"): JetStream never runs in the service account. On an anonymous server (no
 * accounts: tests, a trusted laptop) the process's one connection serves, as it always did.
 */
async function connectStateBuses(config: Config, log: ReturnType<typeof createLogger>, metrics: Metrics): Promise<Map<Role, Bus>> {
  const out = new Map<Role, Bus>();
  if (config.state.kind !== 'jetstream' || config.natsAuth.user === null) return out;
  try {
    for (const role of config.roles) {
      const login = config.natsAuth.state[role];
      if (login) out.set(role, await connectBus(config, log, metrics, { role, ...login }));
    }
  } catch (err) {
    for (const b of out.values()) await b.close().catch(() => undefined);
    throw err;
  }
  return out;
}

/**
 * Starts the roles of `config` in this process. Actors start before the edge so that a single
 * process is ready as soon as it listens; in a cluster, order does not matter (caches retry).
 */
export async function startProcess(config: Config, options: { logDestination?: NodeJS.WritableStream } = {}): Promise<StartedProcess> {
  const log = createLogger({ level: config.logLevel, name: 'pier', destination: options.logDestination, pretty: config.logFormat === 'pretty' });
  const metrics = new Metrics(config.instanceId);
  const stopTracing = await installTracing(config, log, metrics);
  // What a slow start waits for, said every 10 s until it is ready (lib/runtime/start-watch.ts).
  const watch = new StartWatch(log);
  watch.at('the bus (NATS)');
  const bus = await connectBus(config, log, metrics).catch(async (err: unknown) => {
    watch.done();
    await stopTracing();
    throw err;
  });
  const now = () => Date.now() + config.clockOffsetMs;
  // Each role talks through its own view of the bus, limited to the subjects it declared
  // (bus/permissions.ts); what every process shares (presence, the registry cache) has its own.
  const refused = (role: string, action: string, subject: string) => {
    metrics.busRefusals.inc({ reason: 'permission', subject: subject.split('.').slice(0, 3).join('.') });
    log.error({ role, action, subject }, 'bus: a subject outside the role\'s permissions was refused');
  };
  const viewFor = (roles: Role[], name: string) => new GuardedBus(bus, name, permissionsFor(roles, inboxPrefixOf(config.natsAuth.user)), refused);
  const shared = viewFor([], 'process');
  // Messages refused before any handler (undecodable, failing their schema) are counted too.
  onRefusal((subject, reason) => metrics.busRefusals.inc({ reason, subject: subject.split('.').slice(0, 3).join('.') }));
  const cache = new RegistryCache(shared, { maxStalenessMs: config.registry.maxStalenessMs, log, metrics, now });
  const self: ProcessInfo = { id: config.instanceId, busId: randomBytes(6).toString('hex'), roles: config.roles, pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), version: pierVersion(), wire: { speaks: WIRE_VERSION, oldest: OLDEST_WIRE_VERSION } };
  // Secrets on a wire are sealed (bus/seal.ts): this process's keys, announced with its heartbeats.
  const keys = new BusKeys(config.busTrust);
  const peers = new Peers(viewFor(config.roles, 'presence'), self, {
    intervalMs: config.heartbeatMs,
    deadAfterMs: config.peerDeadMs,
    connectionLosses: () => bus.connectionLosses(),
    key: keys.sealer.self.publicKey,
    roleKeys: (role) => keys.announced(role),
    // Heartbeats are signed and proven with the roles' anchored keys where they cross a wire (lib/runtime/heartbeat-proof.ts).
    ...(bus instanceof NatsBus ? { proof: keys } : {}),
    onRefused: (why) => {
      metrics.busRefusals.inc({ reason: 'presence', subject: 'pier.process.heartbeat' });
      log.warn({ why }, 'bus: a heartbeat was not believed');
    },
    // Loud, by name: a process outside this one's window is refused, never waited for (docs/operations.md "Upgrading").
    onMismatch: (peer, role) =>
      log.error(
        { peer: peer.id, role, version: peer.version ?? null, speaks: peer.wire ?? null, ownWire: self.wire },
        `bus: ${role} process ${peer.id} (Pier ${peer.version ?? 'older than 0.2'}) shares no wire format with this one (Pier ${self.version}): nothing is routed to it, and what it sends is refused; upgrade one release at a time`,
      ),
  });
  keys.attach(peers);
  if (bus instanceof NatsBus) bus.sealing = keys;
  const counters = new Map<string, () => number>();
  const natsPorts = (config.natsUrl ?? '').split(',').map((u) => Number(/:(\d+)\/?$/.exec(u.trim())?.[1] ?? (u.trim() ? 4222 : 0)));
  const ownPorts = new Set([...Object.values(config.ports), ...natsPorts].filter((p) => p > 0));
  const stateBuses = await connectStateBuses(config, log, metrics).catch(async (err: unknown) => {
    await bus.close();
    throw err;
  });
  // What an acknowledgement means on this server: said once, in one line, never refused (docs/operations.md).
  if (config.state.kind === 'jetstream' && bus instanceof NatsBus) {
    void judgeDurability(bus.serverVersion(), config.natsMonitorUrl, fetchVarz).then((v) => {
      if (v.ok) log.info({ natsServer: bus.serverVersion() }, 'nats durability: JetStream syncs before it acknowledges');
      else log.warn({ natsServer: bus.serverVersion() }, `nats durability: ${v.line}`);
    });
  }
  const jetstreamOf = (role: Role) => {
    const own = stateBuses.get(role) ?? (config.natsAuth.user === null ? bus : null);
    return own instanceof NatsBus ? own.jetstream() : null;
  };
  const ctx: RoleContext = { bus: shared, config, log, metrics, cache, now, peers, counters, ownPorts, boundPorts: {}, jetstream: null };
  const as = (role: Role): RoleContext => ({ ...ctx, bus: viewFor([role], role), jetstream: jetstreamOf(role) });
  const closeStateBuses = async () => {
    for (const b of stateBuses.values()) await b.close().catch(() => undefined);
  };
  const running: NamedRunning[] = [named('tracing', { stop: stopTracing }), named('state connections', { stop: closeStateBuses }), named('registry cache', { stop: async () => cache.stop() }), named('presence', { stop: async () => peers.stop() })];
  peers.start();
  const actors: RunningActor[] = [];
  let cacheStarted = false;
  let ports: Partial<Config['ports']> | null = null;
  let probePort: number | null = null;
  try {
    // The registry first; every other role reads it through the cache, which loads in the
    // background (the roles answer 503 until it has).
    // Each role's code is imported here, by the process that runs it, not by every process (cli/roles.ts).
    for (const { declaration, load } of ACTORS) {
      const { role } = declaration;
      if (role !== 'registry' && !cacheStarted) {
        cache.start();
        cacheStarted = true;
      }
      if (!config.roles.includes(role)) continue;
      watch.at(`the ${role} role to open its state`);
      const started = await startActor(await load(), as(role));
      actors.push(started);
      running.push(named(role, started));
    }
    // Every store is open now: the data dir and all of Pier's files in it become private.
    await makePrivate(config.dataDir, [config.upload.root]);
    if (config.roles.includes('edge')) {
      watch.at('the edge to open its history and listeners');
      const edge = as('edge');
      // The edge's own actor (the gateway history) where it keeps history, before its listeners;
      // why it does not is said once, here (edge/gateway/history-off.ts).
      const history = await keepsHistory(edge);
      for (const { load } of history ? EDGE_ACTORS : []) {
        const started = await startActor(await load(), edge);
        actors.push(started);
        running.push(named('history', started));
      }
      // The listeners (and uWebSockets.js) only in a process that has them.
      const { startEdge } = await import('../edge/server.js');
      running.push(named('edge', await startEdge(edge, history)));
    }
    if (config.roles.includes('admin')) {
      watch.at('the admin listener');
      const { startAdmin } = await import('../edge/server.js');
      running.push(named('admin', await startAdmin(as('admin'))));
    }
    if (config.probePort !== null) {
      const probe = await startProbeServer({ host: config.bindHost, port: config.probePort, bus, cache, metrics, adminHosts: config.adminHosts });
      running.push(named('probe listener', probe));
      probePort = probe.port;
    }
    ports = Object.keys(ctx.boundPorts).length > 0 ? ctx.boundPorts : null;
  } catch (err) {
    watch.done();
    for (const r of running.reverse()) await r.stop().catch(() => undefined);
    await bus.close();
    throw err;
  }
  // The last safety net: a promise rejected with nobody listening is a bug, logged and counted, not
  // a reason to drop every connection and request this process holds.
  const onUnhandled = (err: unknown) => {
    metrics.handlerFailures.inc({ where: 'unhandled rejection' });
    log.error({ err }, 'unhandled rejection');
  };
  process.on('unhandledRejection', onUnhandled);
  const endpointStats = () => Object.fromEntries(actors.flatMap((a) => Object.entries(a.stats()).map(([name, stats]) => [`${a.role}.${name}`, stats])));
  const presence = announceProcess(shared, self, metrics, () => Object.fromEntries([...counters].map(([k, f]) => [k, f()])), peers, endpointStats);
  // The operator console (docs/operations.md "Console") is on the admin listener, loopback only.
  const consoleUrl = ports?.admin ? `http://127.0.0.1:${ports.admin}/console/` : undefined;
  watch.done();
  log.info({ roles: config.roles, bus: bus.kind, busId: self.busId, dataDir: config.dataDir, ports, ...(consoleUrl ? { console: consoleUrl } : {}), ...(probePort !== null ? { probePort } : {}), instance: config.instanceId, startMs: Math.round(process.uptime() * 1_000) }, 'pier ready');
  if (consoleUrl) log.info({ console: consoleUrl }, `operator console: ${consoleUrl} (sign in with the admin token)`);
  const gcHint = gcThreadsHint(config.roles);
  if (gcHint) log.warn({ cpus: 1 }, gcHint);

  return {
    config,
    ports,
    async stop(budgetMs = config.stopTimeoutMs) {
      presence.unsubscribe();
      process.off('unhandledRejection', onUnhandled);
      // Edge first (stop taking work), then the actors, then the bus; each within what is left of
      // the budget, and what it still waits for said in the log rather than waited on in silence.
      const end = Date.now() + budgetMs;
      for (const r of running.reverse()) await stopWithin(r, end - Date.now(), log);
      await Promise.race([bus.close(), new Promise((resolve) => setTimeout(resolve, Math.max(100, end - Date.now())).unref())]);
      log.info('pier stopped');
    },
  };
}

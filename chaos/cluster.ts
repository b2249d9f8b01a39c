import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freeLoopbackPort } from '../test/helpers/nats-server.js';
import { pierEnv } from '../test/helpers/pier.js';
import { SecureBus } from '../test/helpers/secure-bus.js';
import { KEYRING_ROLES } from '../lib/config/config.js';
import { until } from '../test/helpers/wait.js';
import { mkdirDurable } from '../lib/state/durable-files.js';
import { ChaosProcess, THIS_BUILD, type Build } from './processes.js';

/** The listeners haproxy balances over the edges, by the name of their port in Pier's config. */
const BALANCED = ['public', 'system', 'local', 'upload'] as const;
export type Balanced = (typeof BALANCED)[number];

/** Every actor role, each replica its own process with its own role identity. */
const ACTOR_ROLES = ['registry', 'token', 'provider', 'vault', 'callback', 'upload'] as const;

export interface ClusterOptions {
  /** Heartbeat and peer death (ms): the bound within which a killed edge's connections get their close. */
  heartbeatMs: number;
  peerDeadMs: number;
  /** Extra environment for every Pier process. */
  env?: Record<string, string>;
  /** Replicas of each actor role (2, the production shape, unless told; the admin is one, the edges two). */
  replicas?: 1 | 2;
  /** The build every process starts on (this checkout's unless told). */
  build?: Build;
  /** The edges' PIER_DRAIN_MS (0: none): /readyz answers 503 that long before they stop on SIGTERM. */
  edgeDrainMs?: number;
  /**
   * Where what Pier keeps lives: every Pier process's data dir and the upload root (a power-cut
   * disk of `--power-cuts`; the cluster folder unless told).
   * Configuration (certificates, identities, anchors) and logs stay in the cluster folder.
   */
  stateRoot?: string;
  /** Where the NATS nodes keep their JetStream stores (`<stateRoot>/nats` unless told). */
  natsStoreDir?: string;
  /** The NATS nodes without `sync_interval: always` (`--nats-default-sync`: what a power cut then loses). */
  natsDefaultSync?: boolean;
}

/**
 * A process's first start, started once more if it gave up because the fresh JetStream cluster would
 * not place its streams of three copies yet ("no suitable peers for placement"). CI runs saw a new
 * secure cluster, its meta leader named by every node and each node's /healthz ok, refuse the
 * registry's first stream for the 30 s a Pier start waits, and the chaos e2e test fail at set-up;
 * why is not known yet, nor whether 30 s more always do. A process that exits before it is ready
 * is no unexpected exit (processes.ts), so the run's checks see nothing of the first try.
 */
async function firstStart(p: ChaosProcess): Promise<void> {
  try {
    await p.start();
  } catch (err) {
    if (!/no suitable peers for placement/.test((err as Error).message)) throw err;
    await p.start();
  }
}

/**
 * The production shape as local processes (the chaos cluster): a 3-node NATS cluster with
 * JetStream, every client authenticated with its role's identity of `pier bus init` over TLS;
 * `PIER_STATE=jetstream` with three copies; two replicas of every actor role; one admin; two edges
 * behind haproxy (Debian's package, configured as deploy/haproxy.cfg, with fast HTTP checks of
 * /readyz so a killed or draining edge leaves the pool within a second). Upload replicas share one upload root, as on one host.
 * Edges keep gateway history on JetStream (`PIER_STATE=jetstream`, the same copies as every other
 * state role, in their own account `PIER_STATE_EDGE`) sealed under `PIER_HISTORY_KEY`, the
 * `history.key` of the bus anchors (`SecureBus.anchorEnv`), as a process without the master key does.
 */
export class ChaosCluster {
  readonly processes = new Map<string, ChaosProcess>();
  /** haproxy's front ports, by listener. */
  readonly front: Record<Balanced, number> = { public: 0, system: 0, local: 0, upload: 0 };
  readonly secrets = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };
  readonly uploadRoot: string;
  private haproxy: ChildProcess | null = null;
  unexpectedExits: Array<{ name: string; code: number | null; signal: string | null; tail: string }> = [];

  private constructor(
    readonly dir: string,
    readonly bus: SecureBus,
    readonly stateRoot: string,
  ) {
    this.uploadRoot = join(stateRoot, 'uploads');
  }

  static async start(dir: string, options: ClusterOptions, onUnexpectedExit: (name: string, code: number | null, signal: string | null) => void): Promise<ChaosCluster> {
    const stateRoot = options.stateRoot ?? dir;
    const storeDir = options.natsStoreDir ?? join(stateRoot, 'nats');
    mkdirSync(storeDir, { recursive: true });
    const bus = await SecureBus.start(dir, {}, { nodes: 3, storeDir, defaultSync: options.natsDefaultSync });
    const cluster = new ChaosCluster(dir, bus, stateRoot);
    try {
      // The operator's folder, made durable as an operator's would be on a real disk (a power-cut disk loses an unsynced one).
      mkdirDurable(cluster.uploadRoot);
      const shared = {
        ...cluster.secrets,
        PIER_STATE: 'jetstream',
        PIER_JS_REPLICAS: '3',
        PIER_HEARTBEAT_MS: String(options.heartbeatMs),
        PIER_PEER_DEAD_MS: String(options.peerDeadMs),
        PIER_UPLOAD_ROOT: cluster.uploadRoot,
        // "pier ready" is an info line, and is how a start is known to be done.
        PIER_LOG_LEVEL: 'info',
        ...options.env,
      };
      const add = async (name: string, roles: string, identity: string, listeners: string[]) => {
        const ports: Record<string, string> = {};
        for (const l of listeners) ports[`PIER_${l.toUpperCase()}_PORT`] = String(await freeLoopbackPort());
        // As in production: the master key only where a role uses it; the bus anchors elsewhere.
        const keyring = roles.split(',').some((r) => (KEYRING_ROLES as readonly string[]).includes(r));
        const trust = keyring ? {} : { PIER_MASTER_KEY: '', ...bus.anchorEnv(cluster.secrets.PIER_MASTER_KEY) };
        const env = pierEnv(join(stateRoot, name), { ...shared, ...bus.envFor(identity), ...ports, ...trust });
        const drain: Record<string, string> = roles === 'edge' && options.edgeDrainMs ? { PIER_DRAIN_MS: String(options.edgeDrainMs), PIER_STOP_TIMEOUT_MS: String(options.edgeDrainMs + 8_000) } : {};
        const p = new ChaosProcess(name, roles, { ...env, ...drain }, (proc, code, signal, tail) => {
          cluster.unexpectedExits.push({ name: proc.name, code, signal, tail: tail.slice(-4000) });
          onUnexpectedExit(proc.name, code, signal);
        }, join(dir, `${name}.log`));
        p.build = options.build ?? THIS_BUILD;
        cluster.processes.set(name, p);
        return p;
      };
      const replicas = Array.from({ length: options.replicas ?? 2 }, (_, i) => i + 1);
      for (const i of replicas) await add(`registry-${i}`, 'registry', 'registry', []);
      for (const role of ACTOR_ROLES.filter((r) => r !== 'registry')) for (const i of replicas) await add(`${role}-${i}`, role, role, []);
      await add('admin', 'admin', 'admin', ['admin']);
      for (const i of [1, 2]) await add(`edge-${i}`, 'edge', 'edge', [...BALANCED]);
      await cluster.startInOrder(firstStart);
      await cluster.startHaproxy();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /**
   * Starts every process the way a cluster comes up: the registry replicas first (the others read
   * it), then every other one at once. `start` is how one process is started (a first start, or a
   * restart that records its failures).
   */
  async startInOrder(start: (p: ChaosProcess) => Promise<void>): Promise<void> {
    const all = [...this.processes.values()];
    await Promise.all(all.filter((p) => p.roles === 'registry').map(start));
    await Promise.all(all.filter((p) => p.roles !== 'registry').map(start));
  }

  get adminUrl(): string {
    return `http://127.0.0.1:${this.processes.get('admin')!.ports!.admin}`;
  }

  url(listener: Balanced): string {
    return `http://127.0.0.1:${this.front[listener]}`;
  }

  edges(): ChaosProcess[] {
    return [...this.processes.values()].filter((p) => p.roles === 'edge');
  }

  /**
   * What each edge's log says about gateway history so far: its starts, how many of them said
   * "gateway history: off" (no history key, or no JetStream state: docs/gateway.md "History and
   * recovery"), and how many live gaps it could not read and skipped (for reading a failure).
   */
  edgeHistoryLogs(): Array<{ target: string; starts: number; historyOff: number; gapsSkipped: number }> {
    return this.edges().map((e) => {
      const path = join(this.dir, `${e.name}.log`);
      const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
      return { target: e.name, starts: (text.match(/^--- start /gm) ?? []).length, historyOff: text.split('gateway history: off').length - 1, gapsSkipped: text.split('a gap in live messages could not be read').length - 1 };
    });
  }

  /** An environment for the `pier` CLI against this cluster's admin listener. */
  cliEnv(): Record<string, string> {
    return { ...pierEnv(join(this.dir, 'cli'), this.secrets), PIER_ADMIN_URL: this.adminUrl };
  }

  private async startHaproxy(): Promise<void> {
    if (spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).status !== 0) throw new Error('haproxy is not installed: apt-get install -y haproxy');
    for (const l of BALANCED) this.front[l] = await freeLoopbackPort();
    const edges = this.edges();
    const lines = [
      'global',
      // Within this machine's hard limit on open files (haproxy needs about two per connection).
      '  maxconn 4000',
      'defaults',
      '  mode tcp',
      '  timeout connect 2s',
      '  timeout client 1h',
      '  timeout server 1h',
      // An edge leaves the pool after two failed checks (half a second, then a quarter, apart); a new
      // connection that hits a killed one before then is sent to the other (redispatch). The check
      // is HTTP, of /readyz (every balanced listener answers it), so a draining edge, whose /readyz
      // answers 503 while its listeners still serve, leaves the pool before they close; connections
      // already open stay (haproxy ends no session of a server marked down). HTTP/1.1 with a Host:
      // the edge (uWS) leaves a bare `option httpchk GET /readyz` (HTTP/1.0) unanswered.
      '  option redispatch',
      '  retries 2',
      '  option httpchk',
      '  http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost',
      '  http-check expect status 200',
      '  default-server check inter 500 fastinter 250 fall 2 rise 1',
      ...BALANCED.flatMap((l) => [
        `frontend ${l}`,
        `  bind 127.0.0.1:${this.front[l]}`,
        `  default_backend ${l}`,
        `backend ${l}`,
        ...edges.map((e) => `  server ${e.name} 127.0.0.1:${e.ports![l]}`),
      ]),
      '',
    ];
    const cfg = join(this.dir, 'haproxy.cfg');
    writeFileSync(cfg, lines.join('\n'));
    const haproxy = spawn('haproxy', ['-f', cfg, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.haproxy = haproxy;
    let said = '';
    haproxy.stderr!.on('data', (d: Buffer) => (said = (said + d.toString()).slice(-4000)));
    await until('haproxy to answer readyz through the system front', async () => {
      if (haproxy.exitCode !== null) throw new Error(`haproxy exited: ${said}`);
      return (await fetch(`${this.url('system')}/readyz`).catch(() => null))?.status === 200;
    }, 20_000);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.processes.values()].map((p) => p.kill()));
    for (const p of this.processes.values()) p.closeLog();
    if (this.haproxy && this.haproxy.exitCode === null) {
      const h = this.haproxy;
      await new Promise<void>((resolve) => {
        h.once('exit', () => resolve());
        h.kill('SIGKILL');
      });
    }
    await this.bus.stop();
  }
}

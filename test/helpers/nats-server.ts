import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as natsConnect } from 'nats';
import { freeListenerPort } from './free-port.js';

const BIN = process.env.NATS_SERVER_BIN ?? 'nats-server';
const PATH = `${process.env.PATH}:/usr/sbin:/usr/local/sbin`;

function probe(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

/**
 * A real nats-server for a test, after nats.js's launcher: random port (`-p -1`), the port read
 * from the ports file, probed before use, and the process and its files removed at the end.
 */
/**
 * JetStream writes to disk before it acknowledges (docs/operations.md "What an acknowledgement
 * means"): the line every nats-server configuration of the tests carries (nats-server 2.10 on).
 */
export const SYNC_ALWAYS = 'sync_interval: always';

export class NatsServer {
  private constructor(
    private proc: ChildProcess,
    readonly port: number,
    private readonly dir: string,
    private readonly args: string[],
    private readonly cwd: string | undefined,
  ) {}

  /** Whether the process is still running (false after a kill). */
  get alive(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** `port` -1 lets the server pick; a cluster node needs its port known before its peers start. */
  static async start(extraArgs: string[] = [], port = -1, cwd?: string): Promise<NatsServer> {
    const dir = mkdtempSync(join(tmpdir(), 'pier-nats-'));
    // JetStream on the command line: on disk before it acknowledges, as every configuration Pier
    // documents has it (a node given its own -c carries the setting there: secure-bus.ts).
    const sync: string[] = [];
    if (extraArgs.includes('-js') && !extraArgs.includes('-c')) {
      writeFileSync(join(dir, 'sync.conf'), `jetstream {\n  ${SYNC_ALWAYS}\n}\n`);
      sync.push('-c', join(dir, 'sync.conf'));
    }
    const args = ['-a', '127.0.0.1', '-p', String(port), '--ports_file_dir', dir, ...sync, ...extraArgs];
    const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PATH }, cwd });
    let log = '';
    proc.stderr!.on('data', (d) => (log += d));
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const file = readdirSync(dir).find((f) => f.endsWith('.ports'));
      // (The server may be writing the file right now: a partial one is read again.)
      const ports = file ? readPorts(join(dir, file)) : null;
      if (ports) {
        const port = Number(new URL(ports.nats[0]).port);
        if (await probe(port)) return new NatsServer(proc, port, dir, args, cwd);
      }
      if (proc.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    proc.kill('SIGKILL');
    throw new Error(`nats-server did not start: ${log.slice(-500)}`);
  }

  /** Stops the server (SIGKILL) and starts it again on the same port. */
  async restart(downMs = 0): Promise<void> {
    await this.kill();
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.relaunch();
  }

  /**
   * Starts a killed server again on the same port and store; resolves once it accepts connections
   * (within `waitMs`: a node recovering a large store, or every node of a cluster at once, may take
   * longer than the 10 s a lone restart gets).
   */
  async relaunch(waitMs = 10_000): Promise<void> {
    if (this.alive) throw new Error(`nats-server on port ${this.port} is still running`);
    const args = this.args.map((a, i) => (this.args[i - 1] === '-p' ? String(this.port) : a));
    this.proc = spawn(BIN, args, { stdio: 'ignore', env: { ...process.env, PATH }, cwd: this.cwd });
    const deadline = Date.now() + waitMs;
    while (!(await probe(this.port))) {
      if (Date.now() > deadline) throw new Error(`nats-server on port ${this.port} did not accept connections within ${waitMs} ms of its restart`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      this.proc.once('exit', () => resolve());
      this.proc.kill('SIGKILL');
    });
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The ports file nats-server writes at start, or null while it is still being written. */
function readPorts(path: string): { nats: string[] } | null {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { nats: string[] };
  } catch {
    return null;
  }
}

/** A free TCP port (for nodes whose ports their peers must know in advance): free-port.ts says how it stays free. */
export function freeLoopbackPort(): Promise<number> {
  return freeListenerPort();
}

/**
 * `n` nats-server nodes with JetStream, clustered (each its own store folder under `storeDir`,
 * `dir` unless told): the replicated-state shape of docs/operations.md "How writes stay correct" on
 * one machine.
 */
export async function startJetStreamCluster(dir: string, n = 3, extraArgs: (i: number) => string[] = () => [], storeDir = dir): Promise<NatsServer[]> {
  // Ports are picked free, then bound by the servers: another test may take one in between. Then
  // the whole cluster starts again on new ports (the routes name them all).
  for (let attempt = 1; ; attempt++) {
    const clients = await Promise.all(Array.from({ length: n }, () => freeLoopbackPort()));
    const routes = await Promise.all(Array.from({ length: n }, () => freeLoopbackPort()));
    const monitors = await Promise.all(Array.from({ length: n }, () => freeLoopbackPort()));
    const started = await Promise.allSettled(
      clients.map((port, i) =>
        NatsServer.start(
          [
            '-js', '-sd', join(storeDir, `js-${i + 1}`), '--server_name', `n${i + 1}`, '--cluster_name', 'pier',
            '--cluster', `nats://127.0.0.1:${routes[i]}`,
            '--routes', routes.filter((_, j) => j !== i).map((r) => `nats://127.0.0.1:${r}`).join(','),
            '-m', String(monitors[i]),
            ...extraArgs(i),
          ],
          port,
        ),
      ),
    );
    const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    // A node given its own configuration may ask clients for credentials: its cluster is judged by
    // the nodes' own monitoring (a meta leader known to every node), without a client.
    const unformed = nodes.length !== n ? undefined : extraArgs(0).includes('-c') ? await leaderless(monitors) : await notPlacing(nodes, n);
    if (nodes.length === n && unformed === undefined) return nodes;
    await Promise.all(nodes.map((node) => node.stop()));
    const reason = unformed ?? String((started.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason);
    if (attempt >= 5) throw new Error(`the JetStream cluster did not start (attempt ${attempt}): ${reason}`);
  }
}

/**
 * Why a fresh cluster has no JetStream meta leader known to every node and current on each within
 * 20 s, or undefined once it has: the same stuck start as `notPlacing` (a node that never joined
 * the others) seen through each node's monitoring endpoint (`/jsz`, `/healthz`), for nodes whose
 * clients need credentials.
 */
async function leaderless(monitors: number[]): Promise<string | undefined> {
  const deadline = Date.now() + 20_000;
  let seen: string[] = [];
  for (;;) {
    seen = await Promise.all(
      monitors.map((port) =>
        fetch(`http://127.0.0.1:${port}/jsz`, { signal: AbortSignal.timeout(2_000) })
          .then((r) => r.json() as Promise<{ meta_cluster?: { leader?: string; cluster_size?: number } }>)
          .then((j) => `${j.meta_cluster?.leader ?? ''}/${j.meta_cluster?.cluster_size ?? 0}`)
          .catch(() => ''),
      ),
    );
    // One leader named by every node, and every node current with it (`/healthz`: a CI run's chaos
    // cluster had a leader named by all three, then refused its first stream for 30 s with "no
    // suitable peers for placement"). The stuck start has no leader. (The meta group's size a node
    // reports can lag the nodes that joined: a cluster that works said 2 of 3 for minutes.)
    const leaders = new Set(seen.map((s) => s.split('/')[0]));
    const unhealthy = leaders.size === 1 && !leaders.has('') ? await notCurrent(monitors) : 'no common leader';
    if (unhealthy === undefined) return undefined;
    if (Date.now() > deadline) return `no meta leader known to every node and current on each within 20 s (leader/size per node: ${seen.join(', ')}; ${unhealthy})`;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The nodes whose `/healthz` (JetStream current with its meta leader) does not answer ok, or undefined. */
async function notCurrent(monitors: number[]): Promise<string | undefined> {
  const answers = await Promise.all(
    monitors.map((port) =>
      fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) })
        .then(async (r) => (r.status === 200 ? null : `${port}: ${r.status} ${(await r.text()).slice(0, 200)}`))
        .catch((err: unknown) => `${port}: ${String(err)}`),
    ),
  );
  const bad = answers.filter((a): a is string => a !== null);
  return bad.length === 0 ? undefined : `healthz: ${bad.join('; ')}`;
}

/**
 * Why a fresh cluster does not place a stream of `n` copies within 20 s, or undefined once it does.
 * Now and then one of three fresh nodes never joins the others (each saw two members and no leader):
 * a store opened on it waited its 30 s on "no suitable peers for placement" and failed a test's
 * start. Such a cluster is started again on new ports. Only for nodes given no configuration file (one may ask
 * for credentials: a SecureBus cluster's callers wait at their start, as Pier does).
 */
async function notPlacing(nodes: NatsServer[], n: number): Promise<string | undefined> {
  const nc = await natsConnect({ servers: nodes.map((node) => node.url) }).catch(() => null);
  if (!nc) return 'no node accepted a client';
  const deadline = Date.now() + 20_000;
  try {
    for (;;) {
      try {
        // Asked again each time: JetStream answers nothing until the cluster has its meta leader.
        const jsm = await nc.jetstreamManager({ timeout: 2_000 });
        await jsm.streams.add({ name: 'TEST_PLACEMENT', subjects: ['test.placement'], num_replicas: n });
        await jsm.streams.delete('TEST_PLACEMENT');
        return undefined;
      } catch (err) {
        if (Date.now() > deadline) return `the cluster placed no stream of ${n} copies within 20 s (${String((err as Error).message)})`;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await nc.close();
  }
}

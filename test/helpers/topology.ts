import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { writeBusAnchors } from '../../cli/bus-anchors.js';
import { planIdentities, writeBusInit } from '../../cli/bus-init.js';
import { makeCa, makeLeaf } from './certs.js';
import { freeLoopbackPort as freePort, NatsServer } from './nats-server.js';
import { pierEnv, PierProcess, ROOT, tempDir, cleanup } from './pier.js';

interface ComposeService {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  deploy?: { replicas?: number };
  volumes?: string[];
  working_dir?: string;
}

/**
 * The files an operator prepares before `docker compose up` (README "Scaling out"), made in `dir`
 * the way the README says: `pier bus init --out deploy/nats/bus` and `pier bus anchors` into the same folder, a CA and a certificate for the
 * NATS nodes in deploy/nats/tls, the repository's deploy/nats/nats.conf, and the browsers'
 * certificates in deploy/tls (signed by the same test CA).
 */
/** Users the compose test's browser certificates cover (`*.<user>.localhost`). */
export const TLS_USERS = ['alice', 'carol'];

export function prepareOperatorFiles(dir: string, masterKey: string): string {
  const nats = join(dir, 'deploy', 'nats');
  const tls = join(nats, 'tls');
  mkdirSync(tls, { recursive: true });
  writeBusInit(join(nats, 'bus'), planIdentities());
  writeBusAnchors(join(nats, 'bus'), { PIER_MASTER_KEY: masterKey });
  const ca = makeCa(tls, 'ca');
  makeLeaf(tls, ca, 'nats', ['nats-1', 'nats-2', 'nats-3', 'localhost', 'IP:127.0.0.1']);
  copyFileSync(join(ROOT, 'deploy', 'nats', 'nats.conf'), join(nats, 'nats.conf'));
  // The browsers' certificates: the main one, and one wildcard per user in sni/.
  const browser = join(dir, 'deploy', 'tls');
  mkdirSync(join(browser, 'sni'), { recursive: true });
  const main = makeLeaf(browser, ca, 'edge-made', ['localhost', 'IP:127.0.0.1']);
  copyFileSync(main.cert, join(browser, 'edge.pem'));
  copyFileSync(main.key, join(browser, 'edge.key'));
  for (const user of TLS_USERS) {
    const pair = makeLeaf(browser, ca, `${user}-made`, [`*.${user}.localhost`]);
    copyFileSync(pair.cert, join(browser, 'sni', `*.${user}.localhost.crt`));
    copyFileSync(pair.key, join(browser, 'sni', `*.${user}.localhost.key`));
  }
  return dir;
}

/** Where the balancer's ports lead (the test addresses the first edge, as the balancer would). */
const BALANCED: Record<string, 'public' | 'system' | 'local' | 'upload'> = { '8080': 'public', '40080': 'system', '40010': 'local', '40030': 'upload' };


/** docker-compose.yml as data (YAML merge keys resolved). */
export function readCompose(): Record<string, ComposeService> {
  const doc = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
  return doc.services;
}

/**
 * Runs the compose topology as local processes: each `nats` service becomes a nats-server with the
 * same cluster routes (service names mapped to local ports), each Pier service a `pier` process
 * with its command and environment. The load balancer is the one service left out: tests address
 * each edge directly, which is what the balancer would do.
 */
export class LocalTopology {
  readonly nats = new Map<string, NatsServer>();
  readonly pier = new Map<string, PierProcess>();
  /** Host folders bind-mounted into services (compose `/srv/apps:/srv/apps`) → their scratch folder here. */
  readonly binds = new Map<string, string>();
  private readonly dirs: string[] = [];

  /**
   * `operatorDir`: where the compose file's relative bind mounts (`./deploy/nats/...`) are found
   * (see prepareOperatorFiles).
   */
  static async start(secrets: Record<string, string>, operatorDir: string): Promise<LocalTopology> {
    const services = readCompose();
    const topo = new LocalTopology();
    /** A service's bind mounts: container path → host path here (absolute host paths get a scratch folder). */
    const bindsOf = (svc: ComposeService) => {
      const binds = new Map<string, string>();
      for (const v of svc.volumes ?? []) {
        const [host, inside] = v.split(':');
        if (host.startsWith('./')) binds.set(inside, join(operatorDir, host));
        else if (host.startsWith('/')) {
          if (!topo.binds.has(host)) topo.binds.set(host, tempDir('pier-bind-'));
          binds.set(inside, topo.binds.get(host)!);
        }
      }
      return binds;
    };
    /** A container path as seen here: through the longest bind mount that holds it. */
    const hostPathOf = (binds: Map<string, string>, path: string) => {
      const mount = [...binds.keys()].filter((m) => path === m || path.startsWith(`${m}/`)).sort((a, b) => b.length - a.length)[0];
      return mount === undefined ? path : join(binds.get(mount)!, path.slice(mount.length));
    };
    const natsNames = Object.keys(services).filter((n) => services[n].image?.startsWith('nats'));
    const client = new Map<string, number>();
    const cluster = new Map<string, number>();
    const pickPorts = async () => {
      for (const n of natsNames) {
        client.set(n, await freePort());
        cluster.set(n, await freePort());
      }
    };
    const mapUrl = (text: string) =>
      text.replace(/nats:\/\/([a-z0-9-]+):(\d+)/g, (_m, host: string, port: string) => {
        if (host === '0.0.0.0') return `nats://127.0.0.1:${port === '6222' ? '' : port}`;
        return `nats://127.0.0.1:${port === '6222' ? cluster.get(host) : client.get(host)}`;
      });
    const startNode = async (n: string) => {
      const cmd = [...(services[n].command ?? [])];
      const args: string[] = [];
      for (let i = 0; i < cmd.length; i++) {
        if (cmd[i] === '--http_port') {
          i++;
          continue;
        }
        if (cmd[i] === '--cluster') {
          args.push('--cluster', `nats://127.0.0.1:${cluster.get(n)}`);
          i++;
          continue;
        }
        // A JetStream store in a container volume: a scratch folder per node here.
        if (cmd[i] === '-sd' || cmd[i] === '--store_dir') {
          const store = tempDir(`pier-${n}-js-`);
          topo.dirs.push(store);
          args.push('-sd', store);
          i++;
          continue;
        }
        args.push(mapUrl(cmd[i]));
      }
      const workingDir = services[n].working_dir;
      topo.nats.set(n, await NatsServer.start(args, client.get(n), workingDir ? hostPathOf(bindsOf(services[n]), workingDir) : undefined));
    };
    // A port found free can be taken by a concurrent test before nats-server binds it (seen in CI:
    // "address already in use"): the nodes started so far are stopped, and the cluster starts again
    // on fresh ports, a few times at most. Any other failure stops what started and is thrown.
    for (let attempt = 1; ; attempt++) {
      await pickPorts();
      try {
        for (const n of natsNames) await startNode(n);
        break;
      } catch (err) {
        await Promise.all([...topo.nats.values()].map((node) => node.stop()));
        topo.nats.clear();
        if (attempt >= 3 || !/address already in use/.test(String((err as Error).message))) {
          await topo.stop();
          throw err;
        }
      }
    }
    try {
      const instances = Object.entries(services).flatMap(([name, svc]) => {
        const n = svc.deploy?.replicas ?? 1;
        return Array.from({ length: n }, (_, i) => [n > 1 ? `${name}-${i + 1}` : name, svc] as const);
      });
      const volumes = new Map<string, string>();
      let firstEdge: PierProcess | undefined;
      for (const [name, svc] of instances) {
        if (svc.build === undefined) continue;
        // Replicas mounting one named volume at /data share one data dir, as on one host.
        const volume = svc.volumes?.find((v) => v.endsWith(':/data'))?.split(':')[0];
        const dir = volume ? (volumes.get(volume) ?? tempDir(`pier-${volume}-`)) : tempDir(`pier-${name}-`);
        if (volume) volumes.set(volume, dir);
        topo.dirs.push(dir);
        // Bind mounts: operator files from operatorDir, host folders (app storage) as scratch
        // folders; settings naming a path inside a mount name it here.
        const binds = bindsOf(svc);
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(svc.environment ?? {})) {
          const text = mapUrl(String(v).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1'));
          const balanced = /^lb:(\d+)$/.exec(text);
          if (k in secrets) env[k] = secrets[k];
          else if (balanced && firstEdge) env[k] = `127.0.0.1:${firstEdge.ports![BALANCED[balanced[1]]]}`;
          else env[k] = text.startsWith('/') ? hostPathOf(binds, text) : text;
        }
        const [verb, ...args] = svc.command ?? ['start'];
        if (verb !== 'start') throw new Error(`${name}: only "start" services are supported, got ${verb}`);
        const started = await PierProcess.start(pierEnv(dir, env), args);
        topo.pier.set(name, started);
        if (args[args.indexOf('--roles') + 1]?.split(',').includes('edge')) firstEdge ??= started;
      }
    } catch (err) {
      await topo.stop();
      throw err;
    }
    return topo;
  }

  async stop(): Promise<void> {
    await Promise.all([...this.pier.values()].map((p) => p.stop('SIGKILL')));
    await Promise.all([...this.nats.values()].map((n) => n.stop()));
    new Set([...this.dirs, ...this.binds.values()]).forEach(cleanup);
  }
}

import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import { NatsServer } from './nats-server.js';
import { pierEnv, PierProcess, ROOT, tempDir, cleanup } from './pier.js';

interface ComposeService {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  deploy?: { replicas?: number };
  volumes?: string[];
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

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

  static async start(secrets: Record<string, string>): Promise<LocalTopology> {
    const services = readCompose();
    const topo = new LocalTopology();
    const natsNames = Object.keys(services).filter((n) => services[n].image?.startsWith('nats'));
    const client = new Map<string, number>();
    const cluster = new Map<string, number>();
    for (const n of natsNames) {
      client.set(n, await freePort());
      cluster.set(n, await freePort());
    }
    const mapUrl = (text: string) =>
      text.replace(/nats:\/\/([a-z0-9-]+):(\d+)/g, (_m, host: string, port: string) => {
        if (host === '0.0.0.0') return `nats://127.0.0.1:${port === '6222' ? '' : port}`;
        return `nats://127.0.0.1:${port === '6222' ? cluster.get(host) : client.get(host)}`;
      });
    for (const n of natsNames) {
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
        args.push(mapUrl(cmd[i]));
      }
      topo.nats.set(n, await NatsServer.start(args, client.get(n)));
    }
    try {
      const instances = Object.entries(services).flatMap(([name, svc]) => {
        const n = svc.deploy?.replicas ?? 1;
        return Array.from({ length: n }, (_, i) => [n > 1 ? `${name}-${i + 1}` : name, svc] as const);
      });
      const volumes = new Map<string, string>();
      for (const [name, svc] of instances) {
        if (svc.build === undefined) continue;
        // Replicas mounting one named volume at /data share one data dir, as on one host.
        const volume = svc.volumes?.find((v) => v.endsWith(':/data'))?.split(':')[0];
        const dir = volume ? (volumes.get(volume) ?? tempDir(`pier-${volume}-`)) : tempDir(`pier-${name}-`);
        if (volume) volumes.set(volume, dir);
        topo.dirs.push(dir);
        // Bind mounts of host folders (app storage) become one scratch folder per host path, and
        // settings naming the mount point name that folder.
        const binds = new Map<string, string>();
        for (const v of svc.volumes ?? []) {
          const [host, inside] = v.split(':');
          if (!host.startsWith('/')) continue;
          if (!topo.binds.has(host)) topo.binds.set(host, tempDir('pier-bind-'));
          binds.set(inside, topo.binds.get(host)!);
        }
        const env: Record<string, string> = {};
        for (const [k, v] of Object.entries(svc.environment ?? {})) {
          const text = String(v);
          env[k] = k in secrets ? secrets[k] : (binds.get(text) ?? mapUrl(text.replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')));
        }
        const [verb, ...args] = svc.command ?? ['start'];
        if (verb !== 'start') throw new Error(`${name}: only "start" services are supported, got ${verb}`);
        topo.pier.set(name, await PierProcess.start(pierEnv(dir, env), args));
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

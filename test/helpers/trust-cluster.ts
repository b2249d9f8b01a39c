import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import type { BusRole } from '../../bus/permissions.js';
import { readCredsFile } from '../../lib/config/nats-auth.js';
import type { AppEnv } from './app-client.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from './pier.js';
import { SecureBus } from './secure-bus.js';
import { until } from './wait.js';
import { WsApp, wsManifest } from './ws-app.js';

/**
 * The production shape of docs/security.md "The bus" on one machine: a 3-node JetStream cluster where
 * every client authenticates with an identity of `pier bus init` (TLS on), `PIER_STATE=jetstream`
 * with three copies, one process for every actor role and the admin (identity `all`), and two
 * edges (identity `edge`) without the master key (they trust the bus anchors of `pier bus anchors`). alice has an app `chat` whose gateway callbacks reach a real HTTP app.
 * A `sniffer` may hear every subject of the service account: the test's eyes on the wire.
 */
export interface TrustCluster {
  dir: string;
  bus: SecureBus;
  actors: PierProcess;
  edges: PierProcess[];
  app: WsApp;
  /** alice's user token, and her app's environment. */
  token: string;
  chat: AppEnv;
  cliEnv: Record<string, string>;
  /** A bare client with a role's service identity, or (with `state`) its login to the role's state account. */
  client(role: BusRole, state?: boolean): Promise<NatsConnection>;
  sniffer(): Promise<NatsConnection>;
  startEdge(name: string): Promise<PierProcess>;
  stop(): Promise<void>;
}

export const SHARED = {
  PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'),
  PIER_MASTER_KEY: randomBytes(32).toString('hex'),
  PIER_HEARTBEAT_MS: '250',
  PIER_PEER_DEAD_MS: '2000',
  PIER_STATE: 'jetstream',
  PIER_JS_REPLICAS: '3',
};

/** `env`: settings over SHARED for every Pier process of the cluster (a longer death bound, say). */
export async function trustCluster(options: { env?: Record<string, string> } = {}): Promise<TrustCluster> {
  const shared = { ...SHARED, ...options.env };
  const dir = tempDir();
  const bus = await SecureBus.start(dir, {}, { nodes: 3, sniffer: true });
  const tls = { caFile: bus.ca.cert };
  const processes: PierProcess[] = [];
  // Edges as in production: no master key, the bus anchors instead (`pier bus anchors`).
  const { PIER_MASTER_KEY: masterKey, ...withoutMasterKey } = shared;
  const startEdge = async (name: string) => {
    const p = await PierProcess.start(pierEnv(join(dir, name), { ...withoutMasterKey, ...bus.envFor('edge'), ...bus.anchorEnv(masterKey) }), ['--roles', 'edge']);
    processes.push(p);
    return p;
  };
  const connections: NatsConnection[] = [];
  const keep = (nc: NatsConnection) => (connections.push(nc), nc);
  try {
    const actors = await PierProcess.start(pierEnv(join(dir, 'actors'), { ...shared, ...bus.envFor('all') }), ['--roles', 'registry,token,provider,vault,callback,upload,admin'], 60_000);
    processes.push(actors);
    const edges = [await startEdge('edge1'), await startEdge('edge2')];
    const app = await WsApp.start();
    const cliEnv = { ...pierEnv(join(dir, 'cli'), SHARED), PIER_ADMIN_URL: actors.adminUrl };
    const token = (await cli(['user', 'add', 'alice', '--json'], cliEnv)).json.token as string;
    writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
    const chat = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], cliEnv)).json.env as AppEnv;
    for (const e of edges) {
      await until(`edge ${e.ports!.public} to know alice's app`, async () => {
        const r = await fetch(`http://127.0.0.1:${e.ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': chat.OS_APP_KEY, 'x-app-secret': chat.OS_APP_SECRET } });
        return (await r.json()).code === 0;
      }, 20_000);
    }
    return {
      dir,
      bus,
      actors,
      edges,
      app,
      token,
      chat,
      cliEnv,
      async client(role, state = false) {
        const creds = readCredsFile(join(bus.dir, `${role}.nats.env`));
        const login = state ? creds.state[role] : creds;
        if (!login) throw new Error(`role ${role} has no state login`);
        return keep(await connect({ servers: bus.url.split(','), tls, user: login.user, pass: login.password, inboxPrefix: `_INBOX.${login.user}`, reconnect: false }));
      },
      async sniffer() {
        return keep(await connect({ servers: bus.url.split(','), tls, user: 'sniffer', pass: 'sniffer', reconnect: false }));
      },
      startEdge,
      async stop() {
        await Promise.all(connections.map((c) => c.close().catch(() => undefined)));
        await Promise.all(processes.map((p) => p.stop('SIGKILL')));
        await app.stop();
        await bus.stop();
        cleanup(dir);
      },
    };
  } catch (err) {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await bus.stop();
    cleanup(dir);
    throw err;
  }
}

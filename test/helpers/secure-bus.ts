import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { writeBusAnchors } from '../../cli/bus-anchors.js';
import { join } from 'node:path';
import type { BusRole } from '../../bus/permissions.js';
import { planIdentities, writeBusInit } from '../../cli/bus-init.js';
import { makeCa, makeLeaf, type Pem } from './certs.js';
import { NatsServer, startJetStreamCluster, SYNC_ALWAYS } from './nats-server.js';

/**
 * A nats-server the way docs/security.md "The bus" wants it: every client authenticated with an
 * identity from `pier bus init` (per-role allow-lists, state in per-role accounts), and TLS with a
 * CA the test made. With `nodes: 3`, a JetStream cluster of three, the production shape.
 */
export class SecureBus {
  private constructor(
    readonly nodes: NatsServer[],
    readonly dir: string,
    readonly ca: Pem,
  ) {}

  /**
   * `combos`: extra identities for processes running several roles (`{ 'edge-admin': ['edge', 'admin'] }`).
   * `sniffer`: also a user `sniffer`/`sniffer` in the service account that may hear everything (a
   * test's eyes on the wire; never part of a real set-up).
   * `storeDir`: where a cluster's nodes keep their JetStream stores (a chaos run's power-cut disk);
   * `defaultSync`: without `sync_interval: always` (nats-server's default, for showing what a power
   * cut then loses; never a real set-up).
   */
  static async start(dir: string, combos: Record<string, BusRole[]> = {}, options: { jetstream?: boolean; nodes?: number; sniffer?: boolean; storeDir?: string; defaultSync?: boolean } = {}): Promise<SecureBus> {
    const busDir = join(dir, 'bus');
    mkdirSync(busDir, { recursive: true });
    writeBusInit(busDir, planIdentities(combos));
    if (options.sniffer) {
      const auth = join(busDir, 'auth.conf');
      const text = readFileSync(auth, 'utf8').replace('  PIER: {\n    users: [\n', '  PIER: {\n    users: [\n      { user: "sniffer", password: "sniffer", permissions: { publish: { deny: [">"] }, subscribe: { allow: [">"] } } }\n');
      writeFileSync(auth, text);
    }
    const ca = makeCa(busDir);
    const server = makeLeaf(busDir, ca, 'nats-server', ['IP:127.0.0.1', 'localhost']);
    const conf = join(busDir, 'nats.conf');
    const nodes = options.nodes ?? 1;
    // On disk before it acknowledges (docs/operations.md "What an acknowledgement means"); a cluster's nodes add -js -sd.
    const sync = options.defaultSync ? [] : [`  ${SYNC_ALWAYS}`];
    const jetstream = options.jetstream && nodes === 1 ? ['jetstream {', `  store_dir: ${JSON.stringify(join(busDir, 'js'))}`, ...sync, '}'] : nodes > 1 ? ['jetstream {', ...sync, '}'] : [];
    writeFileSync(conf, ['include ./auth.conf', 'tls {', `  cert_file: ${JSON.stringify(server.cert)}`, `  key_file: ${JSON.stringify(server.key)}`, '  timeout: 2', '}', ...jetstream, ''].join('\n'));
    if (nodes === 1) return new SecureBus([await NatsServer.start(['-c', conf])], busDir, ca);
    return new SecureBus(await startJetStreamCluster(busDir, nodes, () => ['-c', conf], options.storeDir ?? busDir), busDir, ca);
  }

  get url(): string {
    return this.nodes.map((n) => n.url).join(',');
  }

  /**
   * What a process without the master key trusts the bus with (`pier bus anchors`): the anchors of
   * `masterKey`, the callback and admin roles' keys and the history key, written once per master key into this bus's folder.
   */
  anchorEnv(masterKey: string): Record<string, string> {
    const dir = join(this.dir, `anchors-${createHash('sha256').update(masterKey).digest('hex').slice(0, 12)}`);
    if (!existsSync(dir)) writeBusAnchors(dir, { PIER_MASTER_KEY: masterKey });
    return { PIER_BUS_ANCHORS: join(dir, 'anchors'), PIER_CALLBACK_KEY: join(dir, 'callback.key'), PIER_ADMIN_KEY: join(dir, 'admin.key'), PIER_HISTORY_KEY: join(dir, 'history.key') };
  }

  /** The environment of a Pier process running with identity `name` (`edge`, `all`, a combo…). */
  envFor(name: string): Record<string, string> {
    return { NATS_URL: this.url, NATS_CREDS: join(this.dir, `${name}.nats.env`), NATS_TLS_CA: this.ca.cert };
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
  }
}

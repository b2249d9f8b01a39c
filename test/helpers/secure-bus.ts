import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BusRole } from '../../bus/permissions.js';
import { planIdentities, writeBusInit } from '../../lib/bus-init.js';
import { makeCa, makeLeaf, type Pem } from './certs.js';
import { NatsServer } from './nats-server.js';

/**
 * A nats-server the way CONTRACT.md section 9 wants it: every client authenticated with an
 * identity from `pier bus init` (per-role allow-lists), and TLS with a CA the test made.
 */
export class SecureBus {
  private constructor(
    readonly nats: NatsServer,
    readonly dir: string,
    readonly ca: Pem,
  ) {}

  /** `combos`: extra identities for processes running several roles (`{ 'edge-admin': ['edge', 'admin'] }`). */
  static async start(dir: string, combos: Record<string, BusRole[]> = {}, options: { jetstream?: boolean } = {}): Promise<SecureBus> {
    const busDir = join(dir, 'bus');
    mkdirSync(busDir, { recursive: true });
    writeBusInit(busDir, planIdentities(combos));
    const ca = makeCa(busDir);
    const server = makeLeaf(busDir, ca, 'nats-server', ['IP:127.0.0.1', 'localhost']);
    const conf = join(busDir, 'nats.conf');
    const jetstream = options.jetstream ? ['jetstream {', `  store_dir: ${JSON.stringify(join(busDir, 'js'))}`, '}'] : [];
    writeFileSync(conf, ['include ./auth.conf', 'tls {', `  cert_file: ${JSON.stringify(server.cert)}`, `  key_file: ${JSON.stringify(server.key)}`, '  timeout: 2', '}', ...jetstream, ''].join('\n'));
    return new SecureBus(await NatsServer.start(['-c', conf]), busDir, ca);
  }

  get url(): string {
    return this.nats.url;
  }

  /** The environment of a Pier process running with identity `name` (`edge`, `all`, a combo…). */
  envFor(name: string): Record<string, string> {
    return { NATS_URL: this.url, NATS_CREDS: join(this.dir, `${name}.creds`), NATS_TLS_CA: this.ca.cert };
  }

  stop(): Promise<void> {
    return this.nats.stop();
  }
}

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { NatsBus } from '../../bus/bus-nats.js';
import { BusKeys } from '../../cli/bus-keys.js';
import { Peers } from '../../lib/runtime/peers.js';
import type { Role } from '../../lib/config/config.js';
import { busTrustFrom } from '../../lib/config/config-trust.js';
import { Keyring } from '../../lib/crypto/keyring.js';
import { parseMasterKey } from '../../lib/config/config-secrets.js';

/**
 * A bare bus connection that talks as Pier's admin role does: it announces itself (so its replies
 * can be sealed to it) and learns the role keys sealed requests go to, as every Pier process does.
 */
/** The sealing of a bare test process of `roles` that holds `masterKey` (what `cli/start.ts` gives a Pier process). */
export function sealingFor(masterKey: string, roles: Role[]): BusKeys {
  return new BusKeys(busTrustFrom({ PIER_MASTER_KEY: masterKey }, roles, new Keyring(parseMasterKey(masterKey, 'PIER_MASTER_KEY')), true, true));
}

export async function operatorBus(url: string, masterKey: string): Promise<{ bus: NatsBus; stop(): Promise<void> }> {
  const bus = await NatsBus.connect({ url, name: 'test: the operator' });
  const keys = sealingFor(masterKey, ['admin']);
  const self = { id: `test-operator-${randomBytes(4).toString('hex')}`, busId: randomBytes(6).toString('hex'), roles: ['admin'], pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
  const peers = new Peers(bus, self, { intervalMs: 250, deadAfterMs: 5_000, key: keys.sealer.self.publicKey });
  keys.attach(peers);
  peers.start();
  bus.sealing = keys;
  return {
    bus,
    async stop() {
      peers.stop();
      await bus.close();
    },
  };
}

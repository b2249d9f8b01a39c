import { join } from 'node:path';
import { connect, type NatsConnection } from 'nats';
import { vaultState } from '../bus/subjects.js';
import { readCredsFile } from '../lib/config/nats-auth.js';
import type { ChaosCluster } from './cluster.js';
import type { History } from './history.js';

/**
 * How many value keys the vault has written so far (docs/vault.md "Destroyed"), read
 * every `everyMs` from the end of their bucket's stream with the vault's own state login, and
 * written to the history (`vault` `value keys`, `written`: the stream's last sequence, which only
 * grows): what the upgrade checker judges a writer's gate by (checks/value-keys.ts). A build
 * without the bucket (0.2.0) records nothing. Answers the stop.
 */
export async function sampleValueKeys(cluster: ChaosCluster, history: History, everyMs: number): Promise<() => Promise<void>> {
  const login = readCredsFile(join(cluster.bus.dir, 'vault.nats.env')).state.vault;
  if (!login) return async () => undefined;
  let nc: NatsConnection | null = null;
  let stopped = false;
  const sample = async () => {
    try {
      nc ??= await connect({ servers: cluster.bus.url, tls: { caFile: cluster.bus.ca.cert }, user: login.user, pass: login.password, inboxPrefix: `_INBOX.${login.user}`, maxReconnectAttempts: -1 });
      const info = await (await nc.jetstreamManager()).streams.info(`KV_${vaultState.valueKeys}`);
      if (!stopped) history.info('vault', 'value keys', { written: info.state.last_seq });
    } catch {
      // No bucket yet (a build before 0.3), or a node away: the next sample tells.
    }
  };
  const timer = setInterval(() => void sample(), everyMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await nc?.close().catch(() => undefined);
  };
}

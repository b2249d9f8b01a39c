import { join } from 'node:path';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { decode } from '../bus/codec.js';
import { vaultState } from '../bus/subjects.js';
import { readCredsFile } from '../lib/config/nats-auth.js';
import { jsNoMessage } from '../lib/state/jetstream.js';
import type { ChaosCluster } from './cluster.js';
import type { History } from './history.js';

/**
 * How many value keys the vault has written so far (docs/vault.md "Destroyed"), read every
 * `everyMs` from their bucket's stream with the vault's own state login and written to the history
 * (`vault` `value keys`, `written`: puts so far): what the upgrade checker judges a writer's gate by
 * (checks/value-keys.ts). Each new message is read: a removal (an erasure, which 0.3.0 makes too)
 * is not a write; a message gone already was a put (only puts are erased). A build without the
 * bucket (0.2.0) records nothing. Answers the stop.
 */
export async function sampleValueKeys(cluster: ChaosCluster, history: History, everyMs: number): Promise<() => Promise<void>> {
  const login = readCredsFile(join(cluster.bus.dir, 'vault.nats.env')).state.vault;
  if (!login) return async () => undefined;
  const stream = `KV_${vaultState.valueKeys}`;
  let nc: NatsConnection | null = null;
  let stopped = false;
  let running = false;
  let seen = 0;
  let puts = 0;
  const isPut = async (jsm: JetStreamManager, seq: number) => {
    try {
      return decode<{ d?: true }>((await jsm.streams.getMessage(stream, { seq })).data).d !== true;
    } catch (err) {
      if (jsNoMessage(err)) return true;
      throw err;
    }
  };
  const sample = async () => {
    if (running) return;
    running = true;
    try {
      nc ??= await connect({ servers: cluster.bus.url, tls: { caFile: cluster.bus.ca.cert }, user: login.user, pass: login.password, inboxPrefix: `_INBOX.${login.user}`, maxReconnectAttempts: -1 });
      const jsm = await nc.jetstreamManager();
      const last = (await jsm.streams.info(stream)).state.last_seq;
      for (; seen < last; seen++) if (await isPut(jsm, seen + 1)) puts++;
      if (!stopped) history.info('vault', 'value keys', { written: puts });
    } catch {
      // No bucket yet (a build before 0.3), or a node away: the next sample goes on from `seen`.
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void sample(), everyMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await nc?.close().catch(() => undefined);
  };
}

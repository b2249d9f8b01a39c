import type { Config } from '../../lib/config/config.js';

/** What decides whether an edge can keep the gateway's history. */
export type HistorySettings = Pick<Config, 'natsUrl' | 'state'> & { gateway: { history: Pick<Config['gateway']['history'], 'on' | 'keys'> } };

/**
 * Why an edge keeps no gateway history although `PIER_WS_HISTORY` is on (docs/gateway.md "History and
 * recovery"), in one line naming every setting that is missing and where to get it; null when it can
 * keep one (or was told not to). The history needs a key to seal it at rest (derived from the master
 * key, or read from `PIER_HISTORY_KEY`: the history.key `pier bus anchors` writes) and, on NATS, a
 * store every edge reaches: JetStream (`PIER_STATE=jetstream`). Both are named at once, so the first
 * fix is not followed by a second warning. The line starts "gateway history: off", as the chaos run's
 * check and the README cluster's test look for.
 */
export function historyOff(config: HistorySettings): string | null {
  if (!config.gateway.history.on) return null;
  const missing: string[] = [];
  if (!config.gateway.history.keys) {
    missing.push('PIER_HISTORY_KEY is not set and this edge holds no master key to derive the key from: set PIER_HISTORY_KEY to the history.key file `pier bus anchors --out DIR` writes (from the master key)');
  }
  if (config.natsUrl !== null && config.state.kind !== 'jetstream') {
    missing.push('PIER_STATE is lmdb, and on NATS the history is kept on JetStream, where every edge reaches it: set PIER_STATE=jetstream (nats-server with JetStream; PIER_JS_REPLICAS=1 on a single server)');
  }
  return missing.length === 0 ? null : `gateway history: off on this edge (sends answer kept: false): ${missing.join('; and ')}`;
}

import { PierError } from '../../bus/errors.js';
import { history } from '../../bus/subjects.js';
import { ask } from '../../bus/verbs.js';
import type { Config } from '../../lib/config/config.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';

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

/** The chain the probe below names: asked for nothing else (its head is read, nothing is kept). */
const PROBE = { id: 'pier/probe', user: 'pier', name: 'probe', installedAt: '-', appKey: '-' };

/**
 * Whether this edge keeps gateway history, said at start with every reason it does not, in one
 * line each (each starts "gateway history: off", as the chaos run's check looks for): its settings
 * (`historyOff`); on NATS, no login to its JetStream state account; or an identity written by a
 * `pier bus init` before the history had its own actor, which may not use `pier.history.*`: such
 * an edge runs on, its sends say `kept: false` and recoveries `off`, until the identities are
 * written again. Where it does, its history actor (actors/history/) starts with it.
 */
export async function keepsHistory(ctx: RoleContext): Promise<boolean> {
  const off = historyOff(ctx.config);
  if (off) ctx.log.warn({}, off);
  const h = ctx.config.gateway.history;
  if (off || !h.on || !h.keys) return false;
  if (ctx.bus.kind === 'memory') return true;
  if (!ctx.jetstream) {
    ctx.log.warn({}, 'gateway history: off on this edge: its NATS identity has no login to its JetStream state account (rerun `pier bus init` and give the edge its new .nats.env); sends answer kept: false');
    return false;
  }
  // Only the server knows what the identity may do: asked once (a refusal comes back at once).
  const refused = await ask(ctx.bus, history.head, { app: PROBE }, { timeoutMs: 2_000 }).then(
    () => false,
    (err: unknown) => err instanceof PierError && err.code === 'FORBIDDEN',
  );
  if (refused) ctx.log.warn({}, 'gateway history: off on this edge: its NATS identity may not use pier.history.* (written by a `pier bus init` of an earlier release): rerun `pier bus init`, reload nats-server and give the edge its new .nats.env (docs/operations.md "Upgrading"); sends answer kept: false');
  return !refused;
}

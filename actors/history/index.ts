import { join } from 'node:path';
import { parseAppId } from '../../bus/ids.js';
import { PierError } from '../../bus/errors.js';
import { defineActor } from '../../lib/runtime/actor.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { retryWhileStarting } from '../../lib/state/jetstream.js';
import { historyDeclaration } from './declaration.js';
import { GatewayHistory } from './handler.js';
import { HistorySeal } from './seal.js';
import { JetStreamHistory } from './store-jetstream.js';
import { LmdbHistory } from './store-lmdb.js';

interface HistoryActor {
  /** Null: this process keeps none (its settings, or no login to its state account): it answers 503. */
  history: GatewayHistory | null;
}

/**
 * The store of this process, or null. Why it is off for want of a setting is said by the edge at
 * start, every cause at once (edge/gateway/history-off.ts), and then this actor is not started;
 * here only what that cannot know.
 */
async function open(ctx: RoleContext): Promise<GatewayHistory | null> {
  const h = ctx.config.gateway.history;
  if (!h.on || !h.keys) return null;
  const seal = new HistorySeal(h.keys);
  if (ctx.bus.kind === 'memory') return GatewayHistory.over(await LmdbHistory.open(join(ctx.config.dataDir, 'gateway-history'), seal, h.ceilings.ttlMs), h.ceilings, h.messageBytes);
  if (ctx.config.state.kind !== 'jetstream' || !ctx.jetstream) return null;
  // JetStream may be electing its leaders (a NATS node restarting): waited for, as the other state roles do.
  const jsm = await retryWhileStarting(() => ctx.jetstream!.manager());
  const store = await JetStreamHistory.open(ctx.jetstream.js, jsm, seal, { replicas: ctx.config.state.replicas, ceilings: h.ceilings, storeBytes: h.storeBytes, messageBytes: h.messageBytes });
  return GatewayHistory.over(store, h.ceilings, h.messageBytes);
}

const kept = (a: HistoryActor): GatewayHistory => {
  if (!a.history) throw new PierError('UNAVAILABLE', 'gateway history is off in this edge process; try again');
  return a.history;
};

/**
 * The gateway history actor (queue group `history`; docs/gateway.md "History and recovery"): the
 * edge role's own actor, in every edge process that keeps history, with the edge's NATS identity
 * and in the edge's JetStream state account (`PIER_STATE_EDGE`), so it keeps the same stream, with
 * the same records, as the edges of 0.3 that kept it in-process. The edge asks it to keep an app's
 * send to its user, for a chain's head, a reconnecting connection's replay and a gap's entries
 * (bus/subjects-history.ts); it drops an app's history when the app is uninstalled.
 */
export const historyActor = defineActor(historyDeclaration, {
  serves: {
    historyKeep: (a: HistoryActor, req) => kept(a).keep(req.app, req.text),
    historyHead: (a: HistoryActor, req) => kept(a).head(req.app),
    historyRecover: (a: HistoryActor, req) => kept(a).recoverPaged(req.app, req.since ?? (req.malformed ? 'malformed' : null)),
    historyAfter: (a: HistoryActor, req) => kept(a).after(req.app, req.after, req.limit),
  },
  onRegistryChange: (a, change) => {
    // Its history goes with it (a reinstall starts another chain in any case). Every edge process
    // hears the uninstall and purges: the same purge, done once or several times.
    if (change.kind !== 'app' || change.op !== 'delete') return;
    const gone = parseAppId(change.key);
    if (gone && a.history) void a.history.drop(gone.user, gone.app).catch(() => undefined);
  },
  onStart: async (ctx) => ({ history: await open(ctx) }),
  onStop: async (a) => {
    await a.history?.close().catch(() => undefined);
  },
});

import { at } from '../../bus/exchange.js';
import { ask, tell } from '../../bus/verbs.js';
import { Counter, Gauge, Histogram } from 'prom-client';
import { appId } from '../../bus/ids.js';
import { gatewayChannels, gatewaySubjects, movedSigned, MOVED_FRESH_MS, registry, type GatewayEvent } from '../../bus/subjects.js';
import { currentTrace, parseTraceparent, type TraceContext } from '../../bus/trace.js';
import { defineActor } from '../../lib/runtime/actor.js';
import { AddressPolicy, networksList } from '../../lib/policy/address-policy.js';
import { AppSecrets } from '../../lib/crypto/app-secrets.js';
import { registeredTarget } from '../../lib/policy/callback-target.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import type { ConnState } from './connections.js';
import { callbackDeclaration } from './declaration.js';
import { Deliverer } from './delivery.js';
import { edgeGone } from './edge-probe.js';
import { ConnQueues } from './queues.js';
import { reasonOf, Refusals } from './refusals.js';
import { inUploadDest, UploadNotices, uploadTarget } from './upload-notices.js';

/** How long a stopping replica keeps delivering what it has queued (the edges' closes among it). */
const STOP_DELIVERY_MS = 5_000;
/** How long it waits when every target it still has events for is failing (refused, down): retrying will not help now. */
const STOP_FAILING_MS = 1_500;

interface CallbackActor {
  ctx: RoleContext;
  queues: ConnQueues;
  notices: UploadNotices;
  refusals: Refusals;
  deliverer: Deliverer;
  secrets: AppSecrets;
  stopWatching: () => void;
}

async function onStart(ctx: RoleContext): Promise<CallbackActor> {
  const registers = [ctx.metrics.registry];
  const delivered = new Counter({ name: 'pier_callbacks_delivered_total', help: 'Gateway callbacks answered 2xx', labelNames: ['action'], registers });
  const retried = new Counter({ name: 'pier_callbacks_retried_total', help: 'Gateway callback attempts after a failure', registers });
  const dropped = new Counter({ name: 'pier_callbacks_dropped_total', help: 'Gateway callbacks given up after the retry period', labelNames: ['action'], registers });
  const latency = new Histogram({ name: 'pier_callback_seconds', help: 'From receiving a gateway event to the app answering 2xx', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60], registers });
  const held: Gauge = new Gauge({
    name: 'pier_callback_connections',
    help: 'Connections whose events this replica delivers',
    registers,
    collect: () => held.set(queues.size()),
  });
  const refusedTotal = new Counter({ name: 'pier_callbacks_refused_total', help: 'Gateway events refused: no target for the app in the registry view, or a target the address policy forbids', labelNames: ['reason'], registers });
  const refusals = new Refusals((reason) => refusedTotal.inc({ reason }), ctx.log);

  const policy = new AddressPolicy(() => ctx.ownPorts, networksList(ctx.config.provider.networks));
  const deliverer = new Deliverer({ timeoutMs: ctx.config.gateway.callbackTimeoutMs, retryMs: ctx.config.gateway.callbackRetryMs, now: ctx.now }, { retried: () => retried.inc() }, policy);
  // Callback keys (never app secrets), kept per app until it is reinstalled: a close after an uninstall is still signed.
  const secrets = new AppSecrets((appKey) => ask(ctx.bus, registry.appCallbackKey, { appKey }).then((k) => k.callbackKey));
  const secretOf = (conn: Pick<ConnState, 'user' | 'app'>) => () => secrets.of(appId(conn.user, conn.app), () => ctx.cache.app(conn.user, conn.app)?.appKey);

  const queues = new ConnQueues(
    async (ev, conn) => {
      const started = performance.now();
      const outcome = await deliverer.deliver(ev, conn.target, secretOf(conn), eventTraces.get(ev) ?? carriedTrace(ev), conn.handedOver.signal);
      if (outcome === 'handedOver') return outcome;
      if (outcome === 'delivered') {
        delivered.inc({ action: ev.action });
        latency.observe((performance.now() - started) / 1000);
      } else if (outcome === 'refused') {
        refusals.refused('address_policy', ev, 'the callback target leads only to addresses the address policy forbids');
      } else {
        dropped.inc({ action: ev.action });
        ctx.log.warn({ connId: ev.connId, seq: ev.seq, action: ev.action, app: appId(ev.user, ev.app) }, 'gateway callback dropped after retries');
      }
      return outcome;
    },
    (ev) => tell(ctx.bus, at(gatewayChannels.settled, gatewaySubjects.settled(ev.edge)), { connId: ev.connId, seq: ev.seq }),
    (user, app) => registeredTarget(ctx.cache, user, app),
  );
  // Completed uploads, for apps that declared upload.callback: delivered like gateway events.
  const notices = new UploadNotices({
    target: (user, app) => uploadTarget(ctx.cache, user, app),
    inDest: (user, app, path) => inUploadDest(ctx.cache, user, app, path),
    // Called as the notice is accepted: in its request's trace.
    deliver: (ev, target) => deliverer.deliver(ev, target, secretOf(ev), currentTrace()),
    settled: (outcome, n) => {
      if (outcome === 'delivered') delivered.inc({ action: 'upload' });
      else {
        dropped.inc({ action: 'upload' });
        ctx.log.warn({ app: appId(n.user, n.app), eventId: n.eventId, outcome }, 'upload callback not delivered');
      }
    },
  });
  // An edge that died cannot say its connections closed: this replica says it for those it holds,
  // once the edge, asked, proves gone (a starved one is not: its events are still coming).
  const stopWatching = ctx.peers.onDeath((peer) => {
    if (!peer.roles.includes('edge')) return;
    void edgeGone(ctx, peer).then((gone) => {
      if (!gone) return ctx.log.warn({ edge: peer.id }, 'an edge gone silent for the death bound still answers: its connections are kept (a starved process?)');
      for (const close of queues.edgeLost(peer.busId)) ctx.log.info({ connId: close.connId, edge: peer.id }, 'edge lost: raising close');
    });
  });
  ctx.counters.set('callback_connections', () => queues.size());
  ctx.log.info({ busId: ctx.peers.self.busId }, 'callback actor started');
  return { ctx, queues, notices, refusals, deliverer, secrets, stopWatching };
}

/**
 * The trace an event names itself (a 0.3 edge in this process, with no bus hop between): checked
 * as any incoming traceparent, since what reaches an app's header must be one (a forged event's is not).
 */
export const carriedTrace = (ev: GatewayEvent): TraceContext | undefined => (parseTraceparent(ev.trace) ? { traceparent: ev.trace! } : undefined);

/** The trace each queued event arrived in (held as long as the event is). */
const eventTraces = new WeakMap<GatewayEvent, TraceContext>();

/** Says, per app, which callbacks a stop left undelivered, and who will deliver them. */
function reportUndelivered(a: CallbackActor): void {
  const byApp = new Map<string, number>();
  for (const u of a.queues.undelivered()) byApp.set(appId(u.user, u.app), (byApp.get(appId(u.user, u.app)) ?? 0) + u.events);
  if (byApp.size === 0) return;
  const others = a.ctx.peers.alive('callback').filter((p) => p.busId !== a.ctx.peers.self.busId).length;
  // The edges keep every event until it is settled; one stopping in this process keeps nothing.
  const next = a.ctx.config.roles.includes('edge')
    ? 'the edge of this process stops too: they are not sent again'
    : others > 0
      ? `the edges send them to another callback replica (${others} running) once this one is gone`
      : 'the edges keep them until a callback replica runs again';
  for (const [app, events] of byApp) a.ctx.log.warn({ app, events }, `callbacks left undelivered at stop: ${next}`);
}

/**
 * The callback actor: gateway events → the app's `options.websocket` endpoint. Each edge sends all
 * events of one connection to one callback replica (chosen by rendezvous hashing over the live
 * replicas), which keeps a FIFO per connection: open, messages in order, close last. A slow app
 * holds up only its own connections' queues. When an edge dies, the replica raises `close` for
 * that edge's connections it holds, after their queued events. Where a callback goes comes from
 * this replica's own registry view, never from the event (docs/security.md "The bus"), and is dialled
 * through the address policy of provider calls.
 */
export const callbackActor = defineActor(callbackDeclaration, {
  serves: {
    uploaded: (a: CallbackActor, n) => a.notices.accept(n),
    deliver: (a: CallbackActor, ev) => {
      // Its delivery, later and in another turn, is a span of the hop that brought it.
      const trace = currentTrace();
      if (trace) eventTraces.set(ev, trace);
      const ack = a.queues.accept(ev);
      if (!ack.ok) a.refusals.refused(reasonOf(ack.error.code), ev, ack.error.message);
      return ack;
    },
    hello: (a: CallbackActor) => ({ busId: a.ctx.peers.self.busId }),
  },
  hears: {
    moved: (a: CallbackActor, m) => {
      const peers = a.ctx.peers;
      const fresh = Math.abs(a.ctx.now() - m.at) <= MOVED_FRESH_MS;
      if (fresh && peers.signedByBus(m.edge, 'edge', movedSigned(peers.self.busId, m), m.sig)) a.queues.forget(m.connId, m.edge);
      else a.refusals.forged('moved', `a moved notice for ${m.connId} not signed by a live edge ${m.edge}, or stale`);
    },
  },
  onRegistryChange: (a, c) => {
    if (c.kind === 'app' && c.op === 'put') a.secrets.forget(c.value.id);
  },
  onStart,
  onStop: async (a) => {
    a.stopWatching();
    // Deliver what is queued (the edge's closes at shutdown among them), for a bounded time; not
    // long when every target left is failing. What is left is not lost: it was never settled, so
    // the edges keep it and send it to another callback replica (or to this one when it is back).
    const started = Date.now();
    const allFailing = () => a.queues.undelivered().every((u) => a.deliverer.isFailing(u.target));
    while ((a.queues.busy() || a.notices.waiting() > 0) && Date.now() - started < STOP_DELIVERY_MS) {
      if (Date.now() - started >= STOP_FAILING_MS && a.notices.waiting() === 0 && allFailing()) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    reportUndelivered(a);
    await a.deliverer.close();
  },
});

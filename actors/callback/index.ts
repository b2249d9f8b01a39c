import { Counter, Gauge, Histogram } from 'prom-client';
import { answerOn, tellOn } from '../../bus/channel.js';
import { appId } from '../../bus/ids.js';
import { call, serve } from '../../bus/rpc.js';
import { gatewayChannels, gatewaySubjects, registry, uploadNotices } from '../../bus/subjects.js';
import { inUploadDest, UploadNotices, uploadTarget } from './upload-notices.js';
import { AddressPolicy, networksList } from '../../lib/address-policy.js';
import { registeredTarget } from '../../lib/callback-target.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import type { ConnState } from './connections.js';
import { ConnQueues } from './queues.js';
import { Deliverer } from './delivery.js';
import { reasonOf, Refusals } from './refusals.js';

/**
 * The callback actor: gateway events → the app's `options.websocket` endpoint. Each edge sends all
 * events of one connection to one callback replica (chosen by rendezvous hashing over the live
 * replicas), which keeps a FIFO per connection: open, messages in order, close last. A slow app
 * holds up only its own connections' queues. When an edge dies, the replica raises `close` for
 * that edge's connections it holds, after their queued events. Where a callback goes comes from
 * this replica's own registry view, never from the event (CONTRACT.md section 9), and is dialled
 * through the address policy of provider calls.
 */
export async function startCallback(ctx: RoleContext): Promise<Running> {
  const registers = [ctx.metrics.registry];
  const delivered = new Counter({ name: 'pier_callbacks_delivered_total', help: 'Gateway callbacks answered 2xx', labelNames: ['action'], registers });
  const retried = new Counter({ name: 'pier_callbacks_retried_total', help: 'Gateway callback attempts after a failure', registers });
  const dropped = new Counter({ name: 'pier_callbacks_dropped_total', help: 'Gateway callbacks given up after the retry period', labelNames: ['action'], registers });
  const latency = new Histogram({ name: 'pier_callback_seconds', help: 'From receiving a gateway event to the app answering 2xx', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30, 60], registers });
  const held: Gauge = new Gauge({
    name: 'pier_callback_connections',
    help: 'Connections whose events this replica delivers',
    registers,
    collect: () => {
      held.set(queues.size());
    },
  });

  const refusedTotal = new Counter({ name: 'pier_callbacks_refused_total', help: 'Gateway events refused: no target for the app in the registry view, or a target the address policy forbids', labelNames: ['reason'], registers });
  const refusals = new Refusals((reason) => refusedTotal.inc({ reason }), ctx.log);

  const policy = new AddressPolicy(() => ctx.ownPorts, networksList(ctx.config.provider.networks));
  const deliverer = new Deliverer({ timeoutMs: ctx.config.gateway.callbackTimeoutMs, retryMs: ctx.config.gateway.callbackRetryMs, now: ctx.now }, { retried: () => retried.inc() }, policy);
  const secrets = new Map<string, Promise<string>>();
  const forgetSecrets = ctx.cache.onApplied((c) => {
    if (c.kind === 'app' && c.op === 'put') secrets.delete(c.value.id);
  });

  /** The app secret, fetched once per app and kept (a close after uninstall is still signed). */
  const secretOf = (conn: Pick<ConnState, 'user' | 'app'>) => () => {
    const id = appId(conn.user, conn.app);
    let s = secrets.get(id);
    if (!s) {
      const app = ctx.cache.app(conn.user, conn.app);
      if (!app) return Promise.reject(new Error(`app ${id} is not installed`));
      s = call(ctx.bus, registry.appCredentials, { appKey: app.appKey }).then((c) => c.appSecret);
      s.catch(() => secrets.delete(id));
      secrets.set(id, s);
    }
    return s;
  };

  const queues = new ConnQueues(
    async (ev, conn) => {
      const started = performance.now();
      const outcome = await deliverer.deliver(ev, conn.target, secretOf(conn));
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
    (ev) => tellOn(ctx.bus, gatewayChannels.settled, gatewaySubjects.settled(ev.edge), { connId: ev.connId, seq: ev.seq }),
    (user, app) => registeredTarget(ctx.cache, user, app),
  );

  const sub = answerOn(ctx.bus, gatewayChannels.deliver, gatewaySubjects.deliver(ctx.peers.self.busId), (ev) => {
    const ack = queues.accept(ev);
    if (!ack.ok) refusals.refused(reasonOf(ack.error.code), ev, ack.error.message);
    return ack;
  });
  const hello = answerOn(ctx.bus, gatewayChannels.hello, gatewaySubjects.hello(ctx.peers.self.busId), () => ({ busId: ctx.peers.self.busId }));
  // Completed uploads, for apps that declared upload.callback: delivered like gateway events.
  const notices = new UploadNotices({
    target: (user, app) => uploadTarget(ctx.cache, user, app),
    inDest: (user, app, path) => inUploadDest(ctx.cache, user, app, path),
    deliver: (ev, target) => deliverer.deliver(ev, target, secretOf(ev)),
    settled: (outcome, n) => {
      if (outcome === 'delivered') delivered.inc({ action: 'upload' });
      else {
        dropped.inc({ action: 'upload' });
        ctx.log.warn({ app: appId(n.user, n.app), eventId: n.eventId, outcome }, 'upload callback not delivered');
      }
    },
  });
  const noticeSub = serve(ctx.bus, uploadNotices.deliver, (n) => notices.accept(n), { observe: ctx.metrics.observeActor });

  // An edge that died cannot say its connections closed: this replica says it for those it holds.
  const stopWatching = ctx.peers.onDeath((peer) => {
    if (!peer.roles.includes('edge')) return;
    for (const close of queues.edgeLost(peer.busId)) ctx.log.info({ connId: close.connId, edge: peer.id }, 'edge lost: raising close');
  });
  ctx.counters.set('callback_connections', () => queues.size());
  ctx.log.info({ busId: ctx.peers.self.busId }, 'callback actor started');

  return {
    async stop() {
      sub.unsubscribe();
      hello.unsubscribe();
      noticeSub.unsubscribe();
      stopWatching();
      // Deliver what is queued (the edge's closes at shutdown among them), for a bounded time.
      const end = Date.now() + 5_000;
      while ((queues.busy() || notices.waiting() > 0) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      forgetSecrets();
      await deliverer.close();
    },
  };
}

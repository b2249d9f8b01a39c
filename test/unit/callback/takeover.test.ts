import test from 'ava';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { createServer } from 'node:http';
import { ConnQueues } from '../../../actors/callback/queues.js';
import { Deliverer } from '../../../actors/callback/delivery.js';
import { AddressPolicy } from '../../../lib/policy/address-policy.js';
import { until } from '../../helpers/wait.js';

// A connection's events move to another callback replica when the first stops answering (paused,
// cut off); the edge then tells the first one `moved`, after what it had sent it. Chaos runs found
// a paused replica that kept such a connection raising a second close for it when its edge died.
const connId = 'e00000000001.BBBBBBBBBBBBBBBBBBBBBB';
const target = { host: 'chat.alice.svc', port: 8080, url: '/ws/message' };
const event = (seq: number, action: GatewayEvent['action'] = 'message', oldest = seq): GatewayEvent => ({
  eventId: `${connId}:${seq}`, connId, edge: 'e00000000001', user: 'alice', app: 'chat', seq, oldest, action, data: {}, cookie: null,
});

function replica(deliver: (ev: GatewayEvent) => Promise<'delivered'> = async () => 'delivered') {
  const delivered: number[] = [];
  const q = new ConnQueues(async (ev) => (delivered.push(ev.seq), deliver(ev)), () => undefined, () => target);
  return { q, delivered };
}

test('told the connection moved, a replica drops it (queued events too) and raises no close when the edge dies', async (t) => {
  let release = () => undefined as void;
  const stuck = new Promise<'delivered'>((r) => (release = () => r('delivered')));
  // It took the open and two messages, and hangs delivering the open (it is paused).
  const old = replica((ev) => (ev.seq === 1 ? stuck : Promise.resolve('delivered')));
  for (const ev of [event(1, 'open'), event(2), event(3)]) old.q.accept(ev);
  old.q.forget(connId, 'e00000000001');
  release();
  await until('the delivery it had begun to finish', () => old.delivered.includes(1), 5_000);
  t.deepEqual(old.delivered, [1], 'its queued events 2 and 3 were dropped: the new holder has them from the edge');
  t.deepEqual(old.q.edgeLost('e00000000001'), [], 'no close raised for a connection another replica holds');
  t.is(old.q.size(), 0);
});

test('a connection that comes back after it moved away starts again from its next event, and gets its close here', (t) => {
  const r = replica();
  for (const ev of [event(1, 'open'), event(2), event(3)]) r.q.accept(ev);
  r.q.forget(connId, 'e00000000001');
  t.like(r.q.accept(event(7, 'message', 7)), { ok: true });
  t.is(r.q.size(), 1);
  const closes = r.q.edgeLost('e00000000001');
  t.is(closes.length, 1);
  t.is(closes[0].seq, 8, 'after the last event it has, not after the ones it dropped');
});

test('a moved notice for a connection it does not hold changes nothing (a forged or late one)', (t) => {
  const r = replica();
  r.q.forget(connId, 'e00000000001');
  r.q.accept(event(1, 'open'));
  r.q.forget('e00000000001.CCCCCCCCCCCCCCCCCCCCCC', 'e00000000001');
  t.is(r.q.size(), 1);
  // Named by another edge (all edges share one identity): not that edge's connection, kept.
  r.q.forget(connId, 'e00000000002');
  t.is(r.q.size(), 1);
});

// A replica that missed the `moved` notice (cut off when it was sent: core NATS does not keep it)
// still holds the connection at an older seq when the edge dies. A 10-minute chaos run saw its close
// go out under the id of a message another replica had delivered (`<conn>:37` twice, two bodies):
// an app deduplicating by X-Pier-Event-Id would drop the close. A close has its own id, whoever
// raises it, so two raised closes are one to a deduplicating app, and never collide with a message.
test('a close has the id <conn_id>:close, whoever raises it, and never takes a message\'s id', (t) => {
  const stale = replica();
  for (const ev of [event(1, 'open'), event(2)]) stale.q.accept(ev);
  const [close] = stale.q.edgeLost('e00000000001');
  t.is(close!.eventId, `${connId}:close`);
  t.not(close!.eventId, `${connId}:3`, 'seq 3 may be a message delivered by the replica the connection moved to');
});

// A failing app made the old holder retry its running event (backoff up to 5 s, for 60 s): before,
// told the connection moved, it went on retrying and could deliver that event after the new holder
// had delivered later ones and the close. Now the running delivery stops, and is not reported settled.
test('told the connection moved, a replica stops retrying the event it was delivering to a failing app, and does not settle it', async (t) => {
  let attempts = 0;
  const app = createServer((req, res) => {
    attempts++;
    req.resume().on('end', () => res.writeHead(503).end());
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  const port = (app.address() as { port: number }).port;
  const d = new Deliverer({ timeoutMs: 1_000, retryMs: 60_000, now: Date.now }, { retried: () => undefined }, new AddressPolicy(() => new Set(), null));
  const settled: number[] = [];
  const outcomes: string[] = [];
  const q = new ConnQueues(
    async (ev, conn) => {
      const outcome = await d.deliver(ev, { host: '127.0.0.1', port, url: '/cb' }, async () => 'app-secret', undefined, conn.handedOver.signal);
      outcomes.push(outcome);
      return outcome;
    },
    (ev) => settled.push(ev.seq),
    () => target,
  );
  t.teardown(async () => {
    await d.close();
    app.closeAllConnections();
    await new Promise((r) => app.close(r));
  });
  q.accept(event(1, 'open'));
  q.accept(event(2));
  await until('the app to have refused the open twice (retried)', () => attempts >= 2, 10_000);
  q.forget(connId, 'e00000000001');
  await until('the running delivery to end', () => outcomes.length === 1, 10_000);
  t.deepEqual(outcomes, ['handedOver']);
  const after = attempts;
  // The next attempt would have come 200-400 ms after the last one (backoff): none comes.
  await new Promise((r) => setTimeout(r, 1_000));
  t.is(attempts, after, 'no attempt after the hand-over');
  t.deepEqual(settled, [], 'nothing reported settled: the new holder delivers it');
  t.is(q.size(), 0);
});

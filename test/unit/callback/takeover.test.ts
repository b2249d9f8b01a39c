import test from 'ava';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { ConnQueues } from '../../../actors/callback/queues.js';
import { until } from '../../helpers/wait.js';

// A connection's events move to another callback replica when the first stops answering (paused,
// cut off). The first must then forget it: a chaos run found a paused replica, long after the
// connection had closed through the other one, raising a second close for it (under an id its
// message had used) when the edge later died.
const connId = 'e00000000001.BBBBBBBBBBBBBBBBBBBBBB';
const target = { host: 'chat.alice.svc', port: 8080, url: '/ws/message' };
const event = (seq: number, action: GatewayEvent['action'] = 'message', oldest = seq): GatewayEvent => ({
  eventId: `${connId}:${seq}`, connId, edge: 'e00000000001', user: 'alice', app: 'chat', seq, oldest, action, data: {}, cookie: null,
});

function replica(deliver: (ev: GatewayEvent) => Promise<'delivered'> = async () => 'delivered') {
  const taken: Array<[string, number]> = [];
  const delivered: number[] = [];
  const q = new ConnQueues(async (ev) => (delivered.push(ev.seq), deliver(ev)), () => undefined, () => target, undefined, (id, seq) => taken.push([id, seq]));
  return { q, taken, delivered };
}

test('a replica taking over a connection says so; the one that held it forgets it and raises no close when the edge dies', async (t) => {
  let release = () => undefined as void;
  const stuck = new Promise<'delivered'>((r) => (release = () => r('delivered')));
  // The first replica took the open and two messages, and hangs delivering (it is paused).
  const first = replica((ev) => (ev.seq === 1 ? stuck : Promise.resolve('delivered')));
  for (const ev of [event(1, 'open'), event(2), event(3)]) first.q.accept(ev);
  t.deepEqual(first.taken, [], 'a connection begun here is nobody else\'s');
  // The edge moves the connection on (its oldest unsettled event: 1): the second takes it from 1,
  // delivers it, and the close.
  const second = replica();
  for (const ev of [event(1, 'open', 1), event(2, 'message', 1), event(3, 'message', 1), event(4, 'close', 1)]) second.q.accept(ev);
  t.deepEqual(second.taken, [], 'from 1 is not a take-over: nothing was delivered elsewhere');
  // A later move, after the first replica had already settled events 1-3: the second starts at 4.
  const third = replica();
  t.like(third.q.accept(event(4, 'close', 4)), { ok: true });
  t.deepEqual(third.taken, [[connId, 4]], 'it tells the others it took the connection from 4');
  first.q.forget(connId, 4);
  release();
  await until('the first replica to finish the delivery it had begun', () => first.delivered.includes(1), 5_000);
  t.deepEqual(first.q.edgeLost('e00000000001'), [], 'no close raised for a connection another replica holds');
  t.deepEqual(first.delivered, [1], 'its queued events 2 and 3 were dropped: the new holder delivers them');
  t.is(first.q.size(), 0);
});

test('a take-over notice for an older point keeps a connection held further on here (it may have come back: dropping it would lose its new events)', (t) => {
  const r = replica();
  for (const ev of [event(1, 'open'), event(2), event(3)]) r.q.accept(ev);
  r.q.forget(connId, 2);
  t.is(r.q.size(), 1);
  t.is(r.q.edgeLost('e00000000001').length, 1, 'its edge dying still raises its close here');
});

import test from 'ava';
import { LiveOrder, GAP_WAIT_MS } from '../../../edge/gateway/history/order.js';
import { ReplayBudget } from '../../../edge/gateway/history/replay-budget.js';
import { parsePosition } from '../../../bus/subjects.js';
import { messageFrame, recoveryFrame } from '../../../edge/gateway/history/frames.js';
import { sleep, until } from '../../helpers/wait.js';

test('positions: epoch:offset, empty is none, anything else malformed (never an error)', (t) => {
  t.deepEqual(parsePosition('lx2k9a-3f9c01d2:1207'), { epoch: 'lx2k9a-3f9c01d2', offset: 1207 });
  t.is(parsePosition(''), null);
  for (const bad of ['x', 'lx2k9a-3f9c01d2', 'lx2k9a-3f9c01d2:', 'lx2k9a-3f9c01d2:-1', 'LX-3f9c01d2:1', `lx2k9a-3f9c01d2:${'9'.repeat(16)}`, 'a'.repeat(30) + '-3f9c01d2:1', 'lx2k9a-3f9c01d2:1:2']) t.is(parsePosition(bad), 'malformed', bad);
});

test('frames: the payload spliced in as sent; the recovery frame names why not', (t) => {
  t.is(messageFrame('{"a":[1,2]}', 12), '{"event":"pier.message","data":{"offset":12,"payload":{"a":[1,2]}}}');
  t.is(messageFrame('"x"', null), '{"event":"pier.message","data":{"payload":"x"}}');
  t.deepEqual(JSON.parse(recoveryFrame({ recovered: false, epoch: null, offset: null, missed: 0, reason: 'off' })), { event: 'pier.recovery', data: { recovered: false, epoch: null, offset: null, missed: 0, reason: 'off' } });
  t.deepEqual(JSON.parse(recoveryFrame({ recovered: true, epoch: 'e-00000000', offset: 5, missed: 2 })), { event: 'pier.recovery', data: { recovered: true, epoch: 'e-00000000', offset: 5, missed: 2 } });
});

test('replay budget: a user replaying past the minute\'s bytes waits; others do not; it refills; the map is bounded', (t) => {
  let now = 0;
  const budget = new ReplayBudget(1_000, () => now);
  t.true(budget.allows('alice').ok);
  budget.charge('alice', 1_500);
  const refused = budget.allows('alice');
  t.false(refused.ok);
  t.true(!refused.ok && refused.retryAfterS >= 30);
  t.true(budget.allows('bob').ok);
  now += 60_000;
  t.true(budget.allows('alice').ok);
  for (let i = 0; i < 100_010; i++) budget.charge(`u${i}`, 1);
  t.true(budget.size <= 100_000);
});

function orderFor(head: { epoch: string; last: number } | null, stored: Array<{ seq: number; prev: number; text: string | null }> = []) {
  const out: string[] = [];
  const skips: Array<[number, number]> = [];
  const order = new LiveOrder({
    head: async () => head,
    fill: async (_id, after, until) => stored.filter((e) => e.seq > after && e.seq < until),
    deliverText: (_id, seq, text) => out.push(`${seq}:${text}`),
    onSkip: (_id, from, to) => skips.push([from, to]),
  });
  const kept = (seq: number, prev: number) => ({ epoch: 'e', seq, prev });
  return { order, out, skips, kept };
}

test('live order: a message that comes before the one it follows waits for it; a duplicate or one kept before this edge held the chain is dropped', async (t) => {
  const { order, out, kept } = orderFor({ epoch: 'e', last: 10 });
  order.track('alice/chat');
  await until('the head read', () => order.lastOf('alice/chat') === 10);
  order.accept('alice/chat', kept(14, 12), () => out.push('14'));
  order.accept('alice/chat', kept(12, 10), () => out.push('12'));
  order.accept('alice/chat', kept(12, 10), () => out.push('12 again'));
  order.accept('alice/chat', kept(9, 3), () => out.push('9: before this edge held the chain'));
  order.accept('alice/chat', kept(20, 14), () => out.push('20'));
  t.deepEqual(out, ['12', '14', '20']);
  order.untrack('alice/chat');
});

test('live order: a gap nobody sends (its sender died after keeping it) is read from the history; one that cannot be read is skipped, counted, and order goes on', async (t) => {
  const filled = orderFor({ epoch: 'e', last: 10 }, [{ seq: 12, prev: 10, text: '"lost"' }]);
  filled.order.track('a/b');
  await until('the head read', () => filled.order.lastOf('a/b') === 10);
  filled.order.accept('a/b', filled.kept(15, 12), () => filled.out.push('15'));
  t.deepEqual(filled.out, []);
  await until('the gap filled from the history', () => filled.out.length === 2, GAP_WAIT_MS * 5);
  t.deepEqual(filled.out, ['12:"lost"', '15']);
  t.deepEqual(filled.skips, []);

  const skipped = orderFor({ epoch: 'e', last: 10 });
  skipped.order.track('a/b');
  await until('the head read', () => skipped.order.lastOf('a/b') === 10);
  skipped.order.accept('a/b', skipped.kept(15, 12), () => skipped.out.push('15'));
  await until('the gap skipped', () => skipped.out.length === 1, GAP_WAIT_MS * 5);
  t.deepEqual(skipped.skips, [[10, 12]]);
  filled.order.untrack('a/b');
  skipped.order.untrack('a/b');
});

test('live order: while the head is unknown messages wait; a history that cannot be read delivers them in offset order', async (t) => {
  const { order, out, kept } = orderFor(null);
  order.accept('x/y', kept(3, 1), () => out.push('untracked: at once'));
  order.track('x/y');
  order.accept('x/y', kept(7, 5), () => out.push('7'));
  order.accept('x/y', kept(5, 3), () => out.push('5'));
  await until('both delivered', () => out.length === 3, 5_000);
  t.deepEqual(out, ['untracked: at once', '5', '7']);
  order.untrack('x/y');
});

test('hostile: what waits for a gap is bounded in bytes too: past it, everything waiting goes out in offset order at once', async (t) => {
  const { order, out, skips, kept } = orderFor({ epoch: 'e', last: 1 });
  order.track('a/b');
  await until('the head read', () => order.lastOf('a/b') === 1);
  order.accept('a/b', kept(5, 3), () => out.push('5'), 5 * 1024 * 1024);
  t.deepEqual(out, [], 'one large message may wait');
  order.accept('a/b', kept(7, 5), () => out.push('7'), 5 * 1024 * 1024);
  t.deepEqual(out, ['5', '7'], 'two are past the bound: out at once, in order');
  t.deepEqual(skips, [[1, 3]]);
  order.untrack('a/b');
});

test('live order: a gap whose read fails (the history out of reach for a moment) is read again, and delivered once it answers: nothing skipped', async (t) => {
  const out: string[] = [];
  const skips: number[] = [];
  let fails = 2;
  const order = new LiveOrder({
    head: async () => ({ epoch: 'e', last: 10 }),
    fill: async () => {
      if (fails-- > 0) throw new Error('TIMEOUT');
      return [{ seq: 12, prev: 10, text: '"late"' }];
    },
    deliverText: (_id, seq, text) => out.push(`${seq}:${text}`),
    onSkip: (_id, from) => skips.push(from),
  });
  order.track('a/b');
  await until('the head read', () => order.lastOf('a/b') === 10);
  order.accept('a/b', { epoch: 'e', seq: 15, prev: 12 }, () => out.push('15'));
  await until('the gap read on the third try', () => out.length === 2, GAP_WAIT_MS * 8);
  t.deepEqual(out, ['12:"late"', '15']);
  t.deepEqual(skips, []);
  order.untrack('a/b');
});

test('live order: a chain started here by a recovering connection follows on from where its replay ends, not from a head read later (a message kept between the two reads is delivered)', async (t) => {
  // The replay ended at 49; by the time a head would have been read, 52 was kept (and its live
  // delivery missed this edge: its subscription was not in place yet). 53 follows 52.
  const stored = [{ seq: 52, prev: 49, text: '"fifty-two"' }];
  const seeded = orderFor({ epoch: 'e', last: 52 }, stored);
  seeded.order.track('u/app', true);
  seeded.order.accept('u/app', seeded.kept(53, 52), () => seeded.out.push('53'));
  await sleep(GAP_WAIT_MS * 1.5);
  t.deepEqual(seeded.out, [], 'nothing goes out while the replay is read, past the gap wait too');
  seeded.order.seed('u/app', { epoch: 'e', last: 49 });
  await until('52 read from the history, then 53', () => seeded.out.length === 2, GAP_WAIT_MS * 5);
  t.deepEqual(seeded.out, ['52:"fifty-two"', '53']);
  t.deepEqual(seeded.skips, []);
  seeded.order.untrack('u/app');

  // The same chain tracked from a head read after 52 was kept (how it was): 52 is taken as delivered already, and lost.
  const headRead = orderFor({ epoch: 'e', last: 52 }, stored);
  headRead.order.track('u/app');
  await until('the head read', () => headRead.order.lastOf('u/app') === 52);
  headRead.order.accept('u/app', headRead.kept(53, 52), () => headRead.out.push('53'));
  t.deepEqual(headRead.out, ['53'], 'the unseeded order cannot know the connection never got 52: what seeding is for');
  headRead.order.untrack('u/app');
});

test('live order: a replay that ends without a position (its connection gone, the history out of reach) starts the chain from the head instead', async (t) => {
  const { order, out, kept } = orderFor({ epoch: 'e', last: 7 });
  order.track('u/app', true);
  order.accept('u/app', kept(9, 7), () => out.push('9'));
  order.seed('u/app', null);
  await until('9 delivered after the head read', () => out.length === 1, 5_000);
  t.deepEqual(out, ['9']);
  order.seed('u/app', { epoch: 'e', last: 3 });
  t.is(order.lastOf('u/app'), 9, 'a seed once the order is known changes nothing');
  order.untrack('u/app');
});

import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HistorySeal } from '../../../edge/gateway/history/seal.js';
import { LiveOrder, GAP_WAIT_MS } from '../../../edge/gateway/history/order.js';
import { ReplayBudget } from '../../../edge/gateway/history/replay-budget.js';
import { GatewayHistory, parsePosition } from '../../../edge/gateway/history/history.js';
import type { AppView } from '../../../bus/subjects.js';
import { messageFrame, recoveryFrame } from '../../../edge/gateway/history/frames.js';
import { LmdbHistory } from '../../../edge/gateway/history/store-lmdb.js';
import { chainOf, sealBound } from '../../../edge/gateway/history/store.js';
import { cleanup, tempDir } from '../../helpers/pier.js';
import { until } from '../../helpers/wait.js';

const key = (n: number) => Buffer.alloc(32, n);

test('history seal: opens only under its key and at the place it was sealed for; the previous key still opens', (t) => {
  const seal = new HistorySeal([key(1)]);
  const box = seal.seal('hello', 'pier history|alice.chat.00000000|7');
  t.is(seal.open(box, 'pier history|alice.chat.00000000|7'), 'hello');
  t.is(seal.open(box, 'pier history|bob.chat.00000000|7'), null, 'moved to another user');
  t.is(seal.open(box, 'pier history|alice.chat.00000000|8'), null, 'moved to another place');
  t.is(new HistorySeal([key(2)]).open(box, 'pier history|alice.chat.00000000|7'), null, 'another key');
  t.is(new HistorySeal([key(2), key(1)]).open(box, 'pier history|alice.chat.00000000|7'), 'hello', 'the previous key, during a rotation');
  const damaged = Buffer.from(box);
  damaged[damaged.length - 1]! ^= 1;
  t.is(seal.open(damaged, 'pier history|alice.chat.00000000|7'), null);
  t.is(seal.open(Buffer.alloc(3), 'x'), null, 'too short to be a box');
  t.false(box.includes(Buffer.from('hello')));
});

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

test('LMDB history: bounds applied as each message is kept (count, bytes), a chain per install, holes, and nothing in clear on disk', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const seal = new HistorySeal([key(3)]);
  const store = await LmdbHistory.open(join(dir, 'h'), seal, 60_000);
  const app = { id: 'alice/chat', user: 'alice', name: 'chat', installedAt: '2026-11-27T00:00:00.000Z', appKey: 'k1' };
  const chain = chainOf(app);
  const bounds = { messages: 3, bytes: 1_000, ttlMs: 60_000 };
  const kept = [];
  for (const text of ['"a"', '"b"', '"c"', '"d"']) kept.push(await store.append(chain, text, text.length, bounds));
  t.deepEqual(kept.map((k) => k.prev), [0, ...kept.slice(0, 3).map((k) => k.seq)], 'each names the one it follows');
  const all = await store.after(chain, 0, 100);
  t.deepEqual(all.map((e) => e.text), ['"b"', '"c"', '"d"'], 'the oldest past the count went');
  t.is(all[0]!.prev, kept[0]!.seq);
  await store.append(chain, '"' + 'x'.repeat(996) + '"', 998, bounds);
  t.deepEqual((await store.after(chain, 0, 100)).map((e) => e.bytes), [998], 'the oldest past the bytes went, the new one stayed');
  await store.append(chain, null, 70_000, bounds);
  t.is((await store.after(chain, 0, 100)).at(-1)!.text, null, 'a message too large to keep is a hole');
  const reinstalled = chainOf({ ...app, installedAt: '2026-11-27T01:00:00.000Z', appKey: 'k2' });
  t.not(reinstalled.install, chain.install);
  t.deepEqual(await store.after(reinstalled, 0, 100), []);
  t.is((await store.head(reinstalled)).last, 0);
  t.not((await store.head(reinstalled)).epoch, (await store.head(chain)).epoch);
  t.is(seal.open(Buffer.alloc(0), sealBound(chain, 0)), null);
  await store.append(chain, '"marker-q7w8e9"', 15, bounds);
  await store.drop('alice', 'chat');
  t.deepEqual(await store.after(chain, 0, 100), []);
  await store.close();
  for (const f of readdirSync(join(dir, 'h'))) t.false(readFileSync(join(dir, 'h', f)).includes('marker-q7w8e9'), f);
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

test('recovery reads the store\'s order, not the offsets senders followed: a fork (two senders after one message) is replayed whole; a trimmed, foreign or expired position is a gap', async (t) => {
  const now = Date.now();
  // 308 kept; 309 and 310 both sent after 308 (a fork, as nats-server 2.9.10 allows on a cluster); 311 after 310.
  const chainEntries = [
    { seq: 308, prev: 300, at: now, bytes: 3, text: '"a"' },
    { seq: 309, prev: 308, at: now, bytes: 3, text: '"b"' },
    { seq: 310, prev: 308, at: now, bytes: 3, text: '"c"' },
    { seq: 311, prev: 310, at: now, bytes: 3, text: '"d"' },
  ];
  const store = {
    kind: 'lmdb' as const,
    head: async () => ({ epoch: 'e-00000000', last: 311 }),
    at: async (_c: unknown, seq: number) => (seq === 250 ? { at: now - 3_600_000 } : chainEntries.find((e) => e.seq === seq) ?? null),
    after: async (_c: unknown, after: number, limit: number) => chainEntries.filter((e) => e.seq > after).slice(0, limit),
    append: async () => ({ epoch: 'e-00000000', seq: 1, prev: 0 }),
    drop: async () => undefined,
    close: async () => undefined,
  };
  const history = GatewayHistory.over(store, { messages: 100, bytes: 1_000_000, ttlMs: 60_000 }, 65_536);
  const app = { id: 'alice/chat', user: 'alice', name: 'chat', installedAt: 'x', appKey: 'k', websocket: { url: '/', port: 1 } } as unknown as AppView;
  const from = (offset: number) => history.recover(app, { epoch: 'e-00000000', offset });
  const fork = await from(309);
  t.like(fork, { recovered: true, missed: 2, offset: 311 });
  t.deepEqual(fork.replay.map((m) => m.seq), [310, 311]);
  t.like(await from(308), { recovered: true, missed: 3 });
  t.like(await from(305), { recovered: false, reason: 'gap' }, 'not kept in this chain (trimmed, or another chain\'s)');
  t.like(await from(250), { recovered: false, reason: 'gap' }, 'older than the app\'s age bound');
  t.like(await from(0), { recovered: false, reason: 'gap' }, 'from the start, but the start was trimmed');
  t.like(await from(311), { recovered: true, missed: 0 });
  t.like(await from(312), { recovered: false, reason: 'gap' });
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

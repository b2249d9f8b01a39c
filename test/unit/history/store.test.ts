import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HistorySeal } from '../../../actors/history/seal.js';
import { GatewayHistory } from '../../../actors/history/handler.js';
import type { AppView } from '../../../bus/subjects.js';
import { LmdbHistory } from '../../../actors/history/store-lmdb.js';
import { chainOf, sealBound } from '../../../actors/history/store.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

// Moved from test/unit/edge/gateway-history.test.ts with the store (actors/history/): the same tests.
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

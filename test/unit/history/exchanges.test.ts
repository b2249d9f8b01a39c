import test from 'ava';
import { join } from 'node:path';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { PierError } from '../../../bus/errors.js';
import type { Addressed, Exchange } from '../../../bus/exchange.js';
import { ask, serve } from '../../../bus/verbs.js';
import { history, HISTORY_PAGE_BYTES, HISTORY_PAGE_ENTRIES, historyBoundsOf, type AppView, type HistoryApp } from '../../../bus/subjects.js';
import { historyActor } from '../../../actors/history/index.js';
import { GatewayHistory } from '../../../actors/history/handler.js';
import { HistorySeal } from '../../../actors/history/seal.js';
import { LmdbHistory } from '../../../actors/history/store-lmdb.js';
import type { HistoryStore } from '../../../actors/history/store.js';
import { HistoryClient } from '../../../edge/gateway/history/history-client.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

// The history actor's exchanges (bus/subjects-history.ts). Trust model: only an edge identity may
// ask (docs/security.md "The bus"), and an edge may ask for any user's chain, since it serves every
// user: a request for another user's chain is what an edge would ask anyway. Every request is still
// checked as if anyone had sent it: what follows is refused by name before any store is touched.

const ceilings = { messages: 100, bytes: 4 * 1024 * 1024, ttlMs: 60_000 };
const alice: HistoryApp = { id: 'alice/chat', user: 'alice', name: 'chat', installedAt: '2026-11-27T00:00:00.000Z', appKey: 'k1' };
const aliceView = { ...alice, websocket: { url: '/ws', port: 1 } } as unknown as AppView;

/** The actor's declared endpoints served on `bus` over `h`, as startActor serves them. */
function serveActor(bus: MemoryBus, h: GatewayHistory): void {
  for (const e of Object.values(historyActor.serves)) {
    const handle = e.handle as (state: unknown, req: unknown) => unknown;
    serve(bus, e.exchange as Addressed<unknown, unknown>, (req) => Promise.resolve(handle({ history: h }, req)));
  }
}

/** A store that counts what reaches it, and holds nothing. */
function countingStore() {
  const calls: string[] = [];
  const store: HistoryStore = {
    kind: 'lmdb',
    head: async () => (calls.push('head'), { epoch: 'e-00000000', last: 0 }),
    append: async (_c, _t, _b, bounds) => (calls.push(`append ${JSON.stringify(bounds)}`), { epoch: 'e-00000000', seq: 1, prev: 0 }),
    at: async () => (calls.push('at'), null),
    after: async () => (calls.push('after'), []),
    drop: async () => undefined,
    close: async () => undefined,
  };
  return { store, calls };
}

/** The exchange as a forger would use it: nothing checked on the way out, encoded as on a wire. */
const forged = <Req, Res>(ex: Exchange<Req, Res>): Exchange<Req, Res> => ({ ...ex, check: () => [], shared: false });

test('hostile: forged history requests are refused by name, and no store is touched', async (t) => {
  const bus = new MemoryBus();
  const { store, calls } = countingStore();
  serveActor(bus, GatewayHistory.over(store, ceilings, 65_536));
  const refused = async (ex: Exchange<unknown, unknown>, req: unknown, field: RegExp) => {
    const err = await t.throwsAsync(ask(bus, forged(ex), req), { instanceOf: PierError }, JSON.stringify(req).slice(0, 200));
    t.is(err?.code, 'BAD_REQUEST');
    t.regex(err?.message ?? '', field);
  };
  const keep = history.keep as Exchange<unknown, unknown>;
  // Names that are not subject tokens: a dot, a wildcard, a space would reach other chains' subjects.
  await refused(keep, { app: { ...alice, user: 'alice.bob' }, text: '"x"' }, /app\.user/);
  await refused(keep, { app: { ...alice, user: '*' }, text: '"x"' }, /app\.user/);
  await refused(keep, { app: { ...alice, name: 'chat.>' }, text: '"x"' }, /app\.name/);
  await refused(keep, { app: { ...alice, installedAt: 'x'.repeat(65) }, text: '"x"' }, /app\.installedAt/);
  await refused(keep, { app: { ...alice, appKey: 'k'.repeat(129) }, text: '"x"' }, /app\.appKey/);
  await refused(keep, { app: { ...alice, history: { messages: -5 } }, text: '"x"' }, /app\.history/);
  await refused(keep, { app: { ...alice, history: true }, text: '"x"' }, /app\.history/);
  await refused(keep, { app: alice, text: 42 }, /text/);
  await refused(keep, { app: alice }, /text/);
  await refused(keep, { text: '"x"' }, /app/);
  // One chain named, another's id: refused, not taken for either.
  await refused(keep, { app: { ...alice, id: 'bob/chat' }, text: '"x"' }, /alice\/chat/);
  const recover = history.recover as Exchange<unknown, unknown>;
  await refused(recover, { app: alice, since: { epoch: 'NOT-AN-EPOCH', offset: 1 } }, /since\.epoch/);
  await refused(recover, { app: alice, since: { epoch: 'lx2k9a-3f9c01d2', offset: 1e16 } }, /since\.offset/);
  await refused(recover, { app: alice, since: { epoch: 'lx2k9a-3f9c01d2', offset: -1 } }, /since\.offset/);
  const after = history.after as Exchange<unknown, unknown>;
  await refused(after, { app: alice, after: 0, limit: 0 }, /limit/);
  await refused(after, { app: alice, after: 0, limit: 1_000_000 }, /limit/);
  await refused(after, { app: alice, after: 1.5, limit: 10 }, /after/);
  await refused(history.head as Exchange<unknown, unknown>, { app: { ...alice, id: 'x'.repeat(65) } }, /app\.id/);
  t.deepEqual(calls, [], 'nothing reached the store');
  await bus.close();
});

test('hostile: the bounds a request carries only lower the operator\'s ceilings', async (t) => {
  const bus = new MemoryBus();
  const { store, calls } = countingStore();
  serveActor(bus, GatewayHistory.over(store, ceilings, 65_536));
  const greedy = { ...alice, history: { messages: 1e9, bytes: 1e12, ttl: 1e9 } };
  await ask(bus, history.keep, { app: greedy, text: '"x"' });
  t.deepEqual(calls, [`append ${JSON.stringify(ceilings)}`]);
  t.deepEqual(historyBoundsOf(ceilings, greedy.history), ceilings);
  t.deepEqual(historyBoundsOf(ceilings, { messages: 3, ttl: 2 }), { messages: 3, bytes: ceilings.bytes, ttlMs: 2_000 });
  t.is(historyBoundsOf(ceilings, false), null);
  t.deepEqual(await ask(bus, history.keep, { app: { ...alice, history: false }, text: '"x"' }), { kept: null }, 'an app that keeps none is answered so');
  await bus.close();
});

test('a replay larger than a page is answered a page at a time, each well under NATS\'s max payload, and the edge puts it together whole', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const bus = new MemoryBus();
  const store = await LmdbHistory.open(join(dir, 'h'), new HistorySeal([Buffer.alloc(32, 7)]), 60_000);
  const h = GatewayHistory.over(store, ceilings, 256 * 1024);
  serveActor(bus, h);
  const client = new HistoryClient(bus, ceilings);
  const first = await client.keep(aliceView, '"start"');
  const texts = Array.from({ length: 24 }, (_, i) => JSON.stringify(`${i}:${'x'.repeat(100 * 1024)}`));
  for (const text of texts) await client.keep(aliceView, text);
  const since = { epoch: first!.epoch, offset: first!.seq };
  const answer = await ask(bus, history.recover, { app: alice, since });
  t.true(answer.recovered);
  t.true(answer.rest > 0, 'more than a page: the rest is left to `after`');
  t.true(answer.replay.reduce((n, m) => n + Buffer.byteLength(m.text), 0) <= HISTORY_PAGE_BYTES);
  for (let after = answer.replay.at(-1)!.seq; ; ) {
    const page = await ask(bus, history.after, { app: alice, after, limit: 1_000 });
    t.true(page.entries.reduce((n, e) => n + e.bytes, 0) <= HISTORY_PAGE_BYTES, 'a page of `after`');
    if (!page.more) break;
    after = page.entries.at(-1)!.seq;
  }
  const whole = await client.recover(aliceView, since);
  t.like(whole, { recovered: true, missed: texts.length, offset: answer.offset });
  t.deepEqual(whole.replay.map((m) => m.text), texts);
  t.deepEqual(whole, await h.recover(alice, since), 'the same recovery as one read');
  // A gap's entries, paged the same way: every one of them, in order.
  t.deepEqual((await client.between(aliceView, first!.seq, Number.MAX_SAFE_INTEGER)).map((e) => e.text), texts);
  await store.close();
  await bus.close();
});

test('a replay whose messages went between its pages (the bounds dropped them) is a gap, never a partial replay', async (t) => {
  const bus = new MemoryBus();
  const entries = Array.from({ length: 6 }, (_, i) => ({ seq: 10 + i, prev: 9 + i, at: Date.now(), bytes: 200 * 1024, text: `"${'y'.repeat(200 * 1024 - 2)}"` }));
  let trimmed = false;
  const store: HistoryStore = {
    ...countingStore().store,
    head: async () => ({ epoch: 'e-00000000', last: 15 }),
    at: async (_c, seq) => (seq === 9 ? { at: Date.now() } : null),
    // Once the recovery is decided (its read of the bounds and one more), the third is dropped (more came since).
    after: async (_c, after, limit, maxBytes = Infinity) => {
      const kept = entries.filter((e) => e.seq > after && (!trimmed || e.seq > 12)).slice(0, limit);
      let read = 0;
      const out = [];
      for (const e of kept) {
        read += e.bytes;
        if (read > maxBytes) {
          out.push({ ...e, text: null });
          break;
        }
        out.push(e);
      }
      if (limit > ceilings.messages) trimmed = true;
      return out;
    },
  };
  serveActor(bus, GatewayHistory.over(store, ceilings, 256 * 1024));
  const r = await new HistoryClient(bus, ceilings).recover(aliceView, { epoch: 'e-00000000', offset: 9 });
  t.like(r, { recovered: false, reason: 'gap', missed: 0 });
  t.deepEqual(r.replay, []);
  await bus.close();
});

test('a replay of many small messages is paged by count too: no answer holds more than a page of entries', async (t) => {
  const bus = new MemoryBus();
  const entries = Array.from({ length: 1_500 }, (_, i) => ({ seq: i + 2, prev: i + 1, at: Date.now(), bytes: 3, text: '"m"' }));
  const store: HistoryStore = {
    ...countingStore().store,
    head: async () => ({ epoch: 'e-00000000', last: 1_501 }),
    at: async (_c, seq) => (seq === 1 ? { at: Date.now() } : null),
    after: async (_c, after, limit) => entries.filter((e) => e.seq > after).slice(0, limit),
  };
  const wide = { ...ceilings, messages: 2_000 };
  serveActor(bus, GatewayHistory.over(store, wide, 65_536));
  const since = { epoch: 'e-00000000', offset: 1 };
  const answer = await ask(bus, history.recover, { app: alice, since });
  t.is(answer.replay.length, HISTORY_PAGE_ENTRIES);
  t.is(answer.rest, 500);
  const whole = await new HistoryClient(bus, wide).recover(aliceView, since);
  t.like(whole, { recovered: true, missed: 1_500, offset: 1_501 });
  t.deepEqual(whole.replay.map((m) => m.seq), entries.map((e) => e.seq));
  await bus.close();
});

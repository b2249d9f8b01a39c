import test from 'ava';
import { open } from 'lmdb';
import { DecodedCache } from '../../../actors/vault/decoded-cache.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

interface Rec {
  sealed: Uint8Array;
  version: number;
  history: Array<{ version: number }>;
}

function store() {
  const dir = tempDir('pier-decoded-');
  const root = open({ path: dir, compression: false });
  const db = root.openDB<Rec, string>({ name: 'secrets' });
  return { db, close: async () => (await root.close(), cleanup(dir)) };
}

test('a record is decoded once while its bytes stay the same, and a write is seen at the next read', async (t) => {
  const { db, close } = store();
  const cache = new DecodedCache(db);
  await db.put('k', { sealed: Buffer.alloc(1_100, 7), version: 1, history: [] });
  const first = cache.get('k')!;
  t.is(cache.get('k'), first, 'unchanged bytes: the kept record');
  t.is(first.sealed.length, 1_100);
  await db.put('k', { sealed: Buffer.alloc(1_100, 8), version: 2, history: [{ version: 1 }] });
  const second = cache.get('k')!;
  t.not(second, first);
  t.is(second.version, 2);
  t.is(second.sealed[0], 8);
  await db.remove('k');
  t.is(cache.get('k'), undefined);
  t.is(cache.size, 0, 'a removed record is not kept');
  await close();
});

test('answers are frozen (they are shared by every read), and bounded: in entries, and in the size of what is kept', async (t) => {
  const { db, close } = store();
  const cache = new DecodedCache(db, 3, 2_048);
  await db.put('k', { sealed: Buffer.alloc(10), version: 1, history: [{ version: 0 }] });
  const rec = cache.get('k')!;
  t.true(Object.isFrozen(rec));
  t.true(Object.isFrozen(rec.history[0]));
  for (let i = 0; i < 10; i++) {
    await db.put(`n${i}`, { sealed: Buffer.alloc(10), version: i, history: [] });
    t.is(cache.get(`n${i}`)!.version, i);
  }
  t.is(cache.size, 3);
  await db.put('big', { sealed: Buffer.alloc(4_000), version: 1, history: [] });
  const big = cache.get('big')!;
  t.is(big.sealed.length, 4_000);
  t.not(cache.get('big'), big, 'a record past the size bound is decoded on every read');
  await close();
});

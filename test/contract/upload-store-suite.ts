import type { TestFn } from 'ava';
import type { Upload, UploadStore } from '../../actors/upload/store.js';
import { until } from '../helpers/wait.js';

/** Two replicas of the upload store on one backend and one upload root, and a way to open a third later. */
export interface UploadStorePair {
  a: UploadStore;
  b: UploadStore;
  another(): Promise<UploadStore>;
  close(): Promise<void>;
  /**
   * What separates a replica's answer from another replica's read beyond read(), which catches up: nothing on
   * JetStream; on LMDB, one timer turn (lmdb-js renews its read snapshot then: the other
   * "replica" here is another handle in this process, as another process would be).
   */
  turn?: () => Promise<void>;
}

let n = 0;
const upload = (target: string, fields: Partial<Upload> = {}): Upload => ({
  id: `u${++n}-${Math.random().toString(36).slice(2)}`, user: 'alice', app: 'chat', storagePath: '/', relativePath: target, fileType: '', fileSize: 10,
  conflict: 'replace', offset: 0, target, part: `${target}.part`, state: 'active', createdAt: 1, updatedAt: 1, lock: null, ...fields,
});

/** As createUpload does: the unfinished upload at the target wins; a new one only under the cap. */
const create = (s: UploadStore, u: Upload, cap = 100) =>
  s.write((w) => {
    const current = w.unfinishedAt(u.user, u.app, u.target);
    if (current) return current.id;
    if (w.countUnfinished(u.user, u.app) >= cap) return null;
    w.put(u);
    return u.id;
  });

const without = ({ storage: _s, ...u }: Upload) => u;

/**
 * What every upload store must hold (docs/operations.md "How writes stay correct"): a replica reads its own writes at
 * once and the other's once it has caught up; POSTs racing for one target give one upload; the cap
 * on unfinished uploads holds across replicas; a done upload stops being its target's unfinished
 * one; a replica opened later has the same records.
 */
export function uploadStoreSuite(test: TestFn, open: () => Promise<UploadStorePair>): void {
  let pair: UploadStorePair;
  test.before(async () => {
    pair = await open();
  });
  test.after.always(async () => {
    await pair?.close();
  });

  test.serial('a record is read back at once by its writer and by the other replica after sync, the same', async (t) => {
    const u = upload('/r/a.bin');
    t.is(await create(pair.a, u), u.id);
    t.deepEqual(without(pair.a.get(u.id)!), u);
    await pair.b.read(() => undefined);
    await pair.turn?.();
    t.deepEqual(without(pair.b.get(u.id) ?? ({} as Upload)), u, 'the other replica, right after its sync()');
    t.is(pair.b.unfinishedAt('alice', 'chat', '/r/a.bin')?.id, u.id);
    t.is(pair.b.unfinishedAt('bob', 'chat', '/r/a.bin'), undefined, 'another user\'s target is another key');
  });

  test.serial('10 POSTs racing for one target over two replicas: one upload, every POST answered with it', async (t) => {
    const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => create(i % 2 ? pair.a : pair.b, upload('/r/race.bin'))));
    t.is(new Set(ids).size, 1);
    await pair.a.read(() => undefined);
    await until('both replicas to list exactly one record at the target', () => [pair.a, pair.b].every((s) => s.all().filter((u) => u.target === '/r/race.bin').length === 1));
  });

  test.serial('the cap on unfinished uploads holds across replicas: 12 concurrent creates under a cap of 5 leave 5', async (t) => {
    const user = 'capped';
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => create(i % 2 ? pair.a : pair.b, upload(`/cap/${i}`, { user }), 5)));
    t.is(results.filter((r) => r !== null).length, 5);
    await pair.b.read(() => undefined);
    await until('both replicas to count 5', () => [pair.a, pair.b].every((s) => s.all().filter((u) => u.user === user && u.state === 'active').length === 5));
    t.is(await pair.a.write((w) => w.countUnfinished(user, 'chat')), 5);
  });

  test.serial('done stops being the target\'s unfinished upload; remove forgets; a write reads its own changes', async (t) => {
    const u = upload('/r/done.bin');
    await create(pair.a, u);
    await pair.b.read(() => undefined);
    const seen = await pair.b.write((w) => {
      w.put({ ...u, offset: 10, state: 'done' });
      return { read: w.get(u.id)?.state, unfinished: w.unfinishedAt('alice', 'chat', '/r/done.bin')?.id ?? null };
    });
    t.deepEqual(seen, { read: 'done', unfinished: null });
    await pair.a.read(() => undefined);
    await until('the writer\'s change to reach the other replica', () => pair.a.get(u.id)?.state === 'done');
    t.is(pair.a.unfinishedAt('alice', 'chat', '/r/done.bin'), undefined);
    await pair.a.write((w) => w.remove(pair.a.get(u.id)!));
    await pair.b.read(() => undefined);
    await until('the removal to reach the other replica', () => pair.b.get(u.id) === undefined);
    t.pass();
  });

  test.serial('a replica opened later has the same records', async (t) => {
    await pair.a.read(() => undefined);
    const c = await pair.another();
    await c.read(() => undefined);
    const ids = (s: UploadStore) => s.all().map((u) => u.id).sort();
    await until('the new replica to catch up', () => ids(c).join() === ids(pair.a).join());
    t.true(ids(c).length > 5);
    await c.close();
  });
}

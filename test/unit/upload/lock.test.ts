import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UploadLocks, type LockDeps } from '../../../actors/upload/lock.js';
import { LmdbUploadStore, type Upload, type UploadStore } from '../../../actors/upload/store.js';
import { PierError } from '../../../bus/errors.js';
import { within } from '../../helpers/wait.js';

// The upload lock on its own (actors/upload/lock.ts): take, renew, expire, release, and waiters
// woken by the release itself, on a real LMDB store and a clock the test moves.

const anyUpload = (u: Upload | undefined): u is Upload => u !== undefined;

async function setup(t: { teardown: (fn: () => Promise<void>) => void }, options: Partial<LockDeps> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'pier-lock-'));
  const lmdb = LmdbUploadStore.open(join(dir, 'records'));
  let reads = 0;
  // The same store, counting the reads of records: a waiter that polled would read again and again.
  const store: UploadStore = { ...lmdb, read: async (fn) => fn(store), get: (id) => (reads++, lmdb.get(id)), all: () => lmdb.all(), unfinishedAt: (...a) => lmdb.unfinishedAt(...a), write: (fn) => lmdb.write(fn), close: () => lmdb.close() };
  const u: Upload = {
    id: 'u1', user: 'alice', app: 'files', storagePath: '/d', relativePath: 'x', fileType: '', fileSize: 10, conflict: 'replace',
    offset: 0, target: '/t/x', part: '/t/.part', state: 'active', createdAt: 0, updatedAt: 0, lock: null,
  };
  await lmdb.write((w) => w.put(u));
  const clock = { now: 1_000 };
  const announced: string[] = [];
  const locks = new UploadLocks({ store, busId: 'me', now: () => clock.now, leaseMs: 15_000, settleWaitMs: 60_000, replicaAlive: () => false, announce: (id) => announced.push(id), ...options });
  t.teardown(async () => {
    await lmdb.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { locks, store: lmdb, clock, announced, reads: () => reads };
}

test('take: the lock is written with its owner, session and lease; a second take is 409 upload busy', async (t) => {
  const { locks, store } = await setup(t);
  const lease = await locks.take('u1', anyUpload, { touch: true });
  t.truthy(lease);
  t.deepEqual(store.get('u1')!.lock, { owner: 'me', session: lease!.session, until: 16_000 });
  t.is(store.get('u1')!.updatedAt, 1_000, 'a PATCH touches the upload');
  t.true(locks.alive(store.get('u1')!.lock!));
  const second = await t.throwsAsync(locks.take('u1', anyUpload, { touch: true }));
  t.true(second instanceof PierError && second.code === 'CONFLICT' && second.message === 'upload busy');
});

test('take: a refusal of admit leaves no lock behind (thrown, or quiet as null)', async (t) => {
  const { locks, store } = await setup(t);
  const refuse = (u: Upload | undefined): u is Upload => {
    throw new PierError('BAD_REQUEST', `Invalid offset (${u?.offset})`);
  };
  await t.throwsAsync(locks.take('u1', refuse, { touch: true }), { message: 'Invalid offset (0)' });
  t.is(await locks.take('u1', (u): u is Upload => false && anyUpload(u), { touch: false }), null);
  t.is(store.get('u1')!.lock, null);
  t.truthy(await locks.take('u1', anyUpload, { touch: false }), 'the lock is still free to take');
});

test('renew pushes the lease forward; past its end the lock is dead, whoever held it, and can be taken', async (t) => {
  const { locks, store, clock } = await setup(t);
  const lease = (await locks.take('u1', anyUpload, { touch: true }))!;
  clock.now = 10_000;
  await lease.renew();
  t.is(store.get('u1')!.lock!.until, 25_000);
  clock.now = 25_000;
  t.false(locks.alive(store.get('u1')!.lock!), 'a lease that ended is dead even with its session open');
  const next = await locks.take('u1', anyUpload, { touch: true });
  t.not(next!.session, lease.session);
  await lease.renew();
  t.is(store.get('u1')!.lock!.session, next!.session, "the old session's renewal does not take the lock back");
});

test('end: the lock is dead at once, announced to the other replicas, and free to take', async (t) => {
  const { locks, store, announced } = await setup(t);
  const lease = (await locks.take('u1', anyUpload, { touch: true }))!;
  lease.end();
  lease.end();
  t.deepEqual(announced, ['u1'], 'announced once');
  t.false(locks.alive(store.get('u1')!.lock!), 'its session is no longer open here (even before the record says lock: null)');
  t.truthy(await locks.take('u1', anyUpload, { touch: true }));
});

test("a waiter is woken by the lock's end, without polling", async (t) => {
  const { locks, store, reads } = await setup(t);
  const lease = (await locks.take('u1', anyUpload, { touch: true }))!;
  const before = reads();
  const waiting = locks.settled('u1');
  await new Promise((r) => setImmediate(r));
  const whileLocked = reads() - before;
  await store.write((w) => w.put({ ...w.get('u1')!, offset: 4, lock: null }));
  lease.end();
  // The wait is 60 s and the lease 15 s: only the wake-up can end it within the deadline.
  const u = await within('the waiter to be woken by the release', waiting, 5_000);
  t.is(u!.offset, 4, 'it answers what the session recorded');
  t.is(whileLocked, 1, 'one read, then it slept');
  t.is(reads() - before, 2, 'one read more when woken: nothing polled meanwhile');
});

test("another replica's lock: waiters wake on its released event, or when the replica is known dead", async (t) => {
  let remoteAlive = true;
  const { locks, store } = await setup(t, { replicaAlive: (busId) => busId === 'other' && remoteAlive });
  await store.write((w) => w.put({ ...w.get('u1')!, lock: { owner: 'other', session: 's9', until: 16_000 } }));
  t.true(locks.alive(store.get('u1')!.lock!));
  const first = locks.settled('u1');
  await store.write((w) => w.put({ ...w.get('u1')!, offset: 7, lock: null }));
  locks.wake('u1'); // what the `released` event does
  t.is((await within('the waiter to wake on released', first, 5_000))!.offset, 7);

  await store.write((w) => w.put({ ...w.get('u1')!, lock: { owner: 'other', session: 's10', until: 16_000 } }));
  const second = locks.settled('u1');
  remoteAlive = false;
  locks.wakeAll(); // what a replica's death does
  t.is((await within('the waiter to wake on the replica dying', second, 5_000))!.lock!.session, 's10', 'the record still names the dead lock: it is dead, not released');
});

test('a lock of this replica whose session is not open here (a restart: the record survived, the session did not) is dead', async (t) => {
  const { locks, store } = await setup(t);
  await store.write((w) => w.put({ ...w.get('u1')!, lock: { owner: 'me', session: 'gone', until: 16_000 } }));
  t.false(locks.alive(store.get('u1')!.lock!));
  t.truthy(await locks.take('u1', anyUpload, { touch: true }));
});

test('a waiter gives up at its deadline and answers the record as it is; nothing is left waiting', async (t) => {
  const { locks, store } = await setup(t, { settleWaitMs: 30 });
  await locks.take('u1', anyUpload, { touch: true });
  const u = await within('the waiter to give up', locks.settled('u1'), 5_000);
  t.truthy(u!.lock, 'still locked: a PATCH really in progress');
  t.is((locks as unknown as { waiters: Map<string, unknown> }).waiters.size, 0, 'no waiter left behind');
  t.is(store.get('u1')!.lock!.owner, 'me');
});

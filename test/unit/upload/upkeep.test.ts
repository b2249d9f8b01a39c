import test from 'ava';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPart, partPathFor } from '../../../actors/upload/files.js';
import type { UploadDeps } from '../../../actors/upload/deps.js';
import { UploadLocks } from '../../../actors/upload/lock.js';
import { UploadRoot } from '../../../actors/upload/root.js';
import { LmdbUploadStore, type Upload } from '../../../actors/upload/store.js';
import { recover, sweep } from '../../../actors/upload/upkeep.js';
import type { UploadCompleted } from '../../../bus/subjects.js';

// Recovery after a kill -9 (actors/upload/upkeep.ts), from the states a crash can leave on disk.

async function setup(t: { teardown: (fn: () => Promise<void>) => void }) {
  const dir = mkdtempSync(join(tmpdir(), 'pier-upkeep-'));
  const root = new UploadRoot(join(dir, 'files'));
  const dest = root.hostPath('alice', '/dest');
  mkdirSync(dest, { recursive: true });
  const store = LmdbUploadStore.open(join(dir, 'records'));
  const completed: UploadCompleted[] = [];
  const locks = new UploadLocks({ store, busId: 'me', now: Date.now, leaseMs: 15_000, settleWaitMs: 50, replicaAlive: () => false, announce: () => undefined });
  const deps = { store, root, busId: 'me', now: Date.now, chunkMaxBytes: 100, maxUnfinished: 10, locks, completed: (ev: UploadCompleted) => completed.push(ev) } as unknown as UploadDeps;
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const upload = (over: Partial<Upload>): Upload => ({
    id: 'u1', user: 'alice', app: 'files', storagePath: '/dest', relativePath: 'x.bin', fileType: '', fileSize: 5, conflict: 'replace',
    offset: 0, target: join(dest, 'x.bin'), part: partPathFor(dest, 'u1'), state: 'active', createdAt: 0, updatedAt: 0, lock: null, ...over,
  });
  return { deps, store, root, dest, completed, upload };
}

test('killed between publication and the done record: the upload is done, its offset kept, its event sent; no empty part made', async (t) => {
  const { deps, store, completed, upload } = await setup(t);
  // finish() recorded the full size, renamed the part to the target, and the process died.
  const u = upload({ offset: 5 });
  writeFileSync(u.target, 'hello');
  await store.write((w) => w.put(u));
  await recover(deps);
  const after = store.get('u1')!;
  t.is(after.state, 'done');
  t.is(after.offset, 5, 'the acknowledged offset is not taken back');
  t.is(after.lock, null);
  t.false(existsSync(u.part), 'no empty part was made in its place');
  t.is(readFileSync(u.target, 'utf8'), 'hello');
  t.deepEqual(completed, [{ user: 'alice', app: 'files', path: '/dest/x.bin', size: 5 }]);
});

test('a torn write past the recorded offset is cut back; a complete part is published', async (t) => {
  const { deps, store, root, upload } = await setup(t);
  const torn = upload({ offset: 2 });
  await createPart(torn.part, root.userFolder('alice'));
  writeFileSync(torn.part, 'abcd'); // two bytes past what was acknowledged
  await store.write((w) => w.put(torn));
  await recover(deps);
  t.is(readFileSync(torn.part, 'utf8'), 'ab');
  t.is(store.get('u1')!.offset, 2);

  writeFileSync(torn.part, 'abcde');
  await store.write((w) => w.put({ ...torn, offset: 5 }));
  await recover(deps);
  t.is(store.get('u1')!.state, 'done');
  t.is(readFileSync(torn.target, 'utf8'), 'abcde');
});

test('a whole upload whose finish was cut before the rename, after recovery ran: the sweep publishes it, even idle, and never removes it', async (t) => {
  const { deps, store, root, completed, upload } = await setup(t);
  // finish() recorded the full size and its process stopped before the rename; its lock's lease is over.
  const u = upload({ offset: 5, updatedAt: 0, lock: { owner: 'gone', session: 's1', until: Date.now() - 1 } });
  await createPart(u.part, root.userFolder('alice'));
  writeFileSync(u.part, 'hello');
  await store.write((w) => w.put(u));
  await sweep(deps, 1_000);
  const after = store.get('u1')!;
  t.is(after.state, 'done');
  t.is(after.offset, 5);
  t.is(readFileSync(u.target, 'utf8'), 'hello');
  t.false(existsSync(u.part));
  t.deepEqual(completed, [{ user: 'alice', app: 'files', path: '/dest/x.bin', size: 5 }]);
  // An unfinished one, idle as long, is swept with its bytes as before.
  const idle = upload({ id: 'u2', offset: 2, part: u.part.replace('u1', 'u2'), target: u.target.replace('x.bin', 'y.bin'), relativePath: 'y.bin' });
  await createPart(idle.part, root.userFolder('alice'));
  writeFileSync(idle.part, 'he');
  await store.write((w) => w.put(idle));
  await sweep(deps, 1_000);
  t.is(store.get('u2'), undefined);
  t.false(existsSync(idle.part));
});

test('a whole upload that cannot land (conflict=fail, its target taken meanwhile) is not kept forever: swept once idle, the target untouched', async (t) => {
  const { deps, store, root, upload } = await setup(t);
  const u = upload({ offset: 5, conflict: 'fail', updatedAt: 0 });
  await createPart(u.part, root.userFolder('alice'));
  writeFileSync(u.part, 'hello');
  writeFileSync(u.target, 'other');
  await store.write((w) => w.put(u));
  await sweep(deps, 1_000);
  t.is(store.get('u1'), undefined);
  t.false(existsSync(u.part));
  t.is(readFileSync(u.target, 'utf8'), 'other');
});

test("an upload whose writer died holding it keeps a whole idle period from its lease's end: its client, told busy until then, can come back", async (t) => {
  const { deps, store, upload } = await setup(t);
  let now = 1_000_000;
  const clocked = { ...deps, now: () => now } as typeof deps;
  // Last used 10 s ago; its writer (another replica, dead: replicaAlive answers false) leased it until 5 s from now.
  await store.write((w) => w.put(upload({ offset: 2, updatedAt: now - 10_000, lock: { owner: 'dead-replica', session: 's', until: now + 5_000 } })));
  await sweep(clocked, 3_000);
  t.truthy(store.get('u1'), 'within the dead writer\'s lease: kept');
  now += 7_000; // 2 s past the lease's end
  await sweep(clocked, 3_000);
  t.truthy(store.get('u1'), '2 s past the lease (idle limit 3 s): kept');
  now += 2_000;
  await sweep(clocked, 3_000);
  t.is(store.get('u1'), undefined, '4 s past the lease: swept');
});

import test from 'ava';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finish } from '../../../actors/upload/finish.js';
import type { UploadDeps } from '../../../actors/upload/deps.js';
import { createUpload, getUpload, lockForWrite } from '../../../actors/upload/handler.js';
import { sweep } from '../../../actors/upload/upkeep.js';
import { UploadLocks } from '../../../actors/upload/lock.js';
import { UploadRoot } from '../../../actors/upload/root.js';
import { LmdbUploadStore, type UploadStore } from '../../../actors/upload/store.js';
import { PierError } from '../../../bus/errors.js';
import type { AppView, CreateUpload, UploadCompleted, UploadOptions } from '../../../bus/subjects.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';

// The upload actor's handler on its own (tus-node-server style): a real store and folder, a
// stubbed registry view, no bus. What POST, GET and a PATCH's begin answer, and what they leave.

const options: UploadOptions = { fileType: ['txt', 'bin'], dest: '/dest', limitedSize: 1_000 };

async function setup(t: { teardown: (fn: () => Promise<void>) => void }, maxUnfinished = 3, settleWaitMs = 50) {
  const dir = mkdtempSync(join(tmpdir(), 'pier-handler-'));
  const root = new UploadRoot(join(dir, 'files'));
  mkdirSync(root.hostPath('alice', '/dest'), { recursive: true });
  mkdirSync(root.userFolder('bob'), { recursive: true });
  const store = LmdbUploadStore.open(join(dir, 'records'));
  const apps: Record<string, Partial<AppView>> = { 'alice/files': { upload: options }, 'alice/plain': { upload: null }, 'bob/files': { upload: options } };
  const cache = { app: (user: string, app: string) => apps[`${user}/${app}`] } as unknown as RegistryCache;
  const completed: UploadCompleted[] = [];
  const locks = new UploadLocks({ store, busId: 'me', now: Date.now, leaseMs: 15_000, settleWaitMs, replicaAlive: () => false, announce: () => undefined });
  const deps: UploadDeps = { store, cache, root, busId: 'me', now: Date.now, chunkMaxBytes: 100, maxUnfinished, locks, completed: (ev) => completed.push(ev) };
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { deps, root, store, completed };
}

const post = (over: Partial<CreateUpload> = {}): CreateUpload => ({ user: 'alice', app: 'files', storagePath: '/dest', relativePath: 'a.txt', fileType: 'text/plain', fileSize: 10, conflict: 'replace', ...over });

async function refusal(t: { throwsAsync: (p: Promise<unknown>) => Promise<unknown> }, p: Promise<unknown>): Promise<PierError> {
  return (await t.throwsAsync(p)) as PierError;
}

test('POST refusals name what is wrong: unknown app 404, no upload option, file type, size over the limit', async (t) => {
  const { deps, store } = await setup(t);
  t.is((await refusal(t, createUpload(deps, post({ app: 'nope' })))).code, 'NOT_FOUND');
  t.regex((await refusal(t, createUpload(deps, post({ app: 'plain' })))).message, /has no upload option/);
  t.is((await refusal(t, createUpload(deps, post({ relativePath: 'a.exe', fileType: '' })))).code, 'BAD_REQUEST');
  t.is((await refusal(t, createUpload(deps, post({ fileSize: 1_001 })))).message, 'file_size: must be at most 1000 bytes');
  t.is(store.all().length, 0, 'nothing recorded for a refusal');
});

test('POST creates an upload with its part file; the same POST again resumes it; another size replaces it', async (t) => {
  const { deps, store } = await setup(t);
  const first = await createUpload(deps, post());
  t.is(first.record!.offset, 0);
  t.false(first.complete);
  const u = store.get(first.record!.id)!;
  t.true(existsSync(u.part), 'the part exists');
  t.is((await createUpload(deps, post())).record!.id, u.id, 'resumed, not created again');
  const other = await createUpload(deps, post({ fileSize: 20 }));
  t.not(other.record!.id, u.id);
  t.is(store.get(u.id), undefined, 'the old one is cancelled');
  t.false(existsSync(u.part), 'with its bytes');
});

test('a resume (the same POST again) restarts the idle clock: the sweep keeps an upload resumed within the idle limit, and takes it once idle again', async (t) => {
  const { deps, store } = await setup(t);
  let now = 1_000_000;
  const clocked = { ...deps, now: () => now };
  const first = await createUpload(clocked, post());
  const id = first.record!.id;
  now += 2_500;
  await sweep(clocked, 3_000);
  t.truthy(store.get(id), 'idle 2.5 s of 3: kept');
  t.is((await createUpload(clocked, post())).record!.id, id, 'resumed');
  now += 2_500; // 5 s since it was created, 2.5 s since the resume
  await sweep(clocked, 3_000);
  t.truthy(store.get(id), 'resumed 2.5 s ago: kept (the sweep would have taken it at 3 s from its creation)');
  now += 1_000;
  await sweep(clocked, 3_000);
  t.is(store.get(id), undefined, 'idle 3.5 s since the resume: swept');
});

test('hostile: a zero-byte file whose publication another holder took first (the sweep) is answered complete only once it is at its target', async (t) => {
  const { deps, root } = await setup(t);
  const locks = deps.locks as unknown as { take: UploadLocks['take'] };
  const realTake = locks.take.bind(deps.locks);
  let raced = false;
  locks.take = (async (...args: Parameters<UploadLocks['take']>) => {
    if (raced) return realTake(...args);
    raced = true;
    // The sweep's repair takes the lock first and lets it go 30 ms later without publishing (a
    // stall, a lost lease): the POST's own attempt finds it held.
    const lease = await realTake(...args);
    setTimeout(() => lease?.end(), 30);
    return null;
  }) as UploadLocks['take'];
  const answer = await createUpload(deps, post({ relativePath: 'zero.txt', fileSize: 0 }));
  t.true(answer.complete);
  t.true(existsSync(join(root.hostPath('alice', '/dest'), 'zero.txt')), 'the file is at its target when the POST answers complete');
});

test('POST: the cap on unfinished uploads per app is 429; a zero-byte file lands at once; conflict=fail is 409', async (t) => {
  const { deps, root, completed } = await setup(t, 2);
  await createUpload(deps, post({ relativePath: '1.txt' }));
  await createUpload(deps, post({ relativePath: '2.txt' }));
  t.is((await refusal(t, createUpload(deps, post({ relativePath: '3.txt' })))).code, 'RATE_LIMITED');
  const empty = await createUpload(deps, post({ relativePath: 'empty.txt', fileSize: 0 }));
  t.true(empty.complete, 'a zero-byte file is complete (and not counted against the cap)');
  t.is(readFileSync(root.hostPath('alice', '/dest/empty.txt'), 'utf8'), '');
  t.deepEqual(completed, [{ user: 'alice', app: 'files', path: '/dest/empty.txt', size: 0 }]);
  writeFileSync(root.hostPath('alice', '/dest/there.txt'), 'x');
  t.is((await refusal(t, createUpload(deps, post({ relativePath: 'there.txt', conflict: 'fail' })))).code, 'CONFLICT');
});

test("GET and a PATCH's begin: another user's or app's upload is an invalid id, never a hint", async (t) => {
  const { deps } = await setup(t);
  const { record } = await createUpload(deps, post());
  t.is((await getUpload(deps, 'alice', 'files', record!.id)).id, record!.id);
  for (const [user, app] of [['bob', 'files'], ['alice', 'plain']]) {
    t.is((await refusal(t, getUpload(deps, user, app, record!.id))).message, 'Invalid upload ID');
    t.is((await refusal(t, lockForWrite(deps, { user, app, id: record!.id, offset: 0 }))).message, 'Invalid upload ID');
  }
  t.is((await refusal(t, getUpload(deps, 'alice', 'files', 'no-such-id'))).message, 'Invalid upload ID');
});

test("a PATCH's begin while another begin is still taking the lock waits for that one's session, not 409 (a cut PATCH's late begin)", async (t) => {
  // The CI failure: a client cut its PATCH and re-POSTed; the edge sent the cut PATCH's begin late,
  // in the same moment as the next PATCH's. The next one found no lock yet (the other's was being
  // taken, not committed), did not wait, and its take then met the fresh lock: 409 upload busy,
  // though the cut PATCH's session ended a few ms later.
  const { deps } = await setup(t, 3, 2_000);
  const { record } = await createUpload(deps, post());
  const cut = lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: null });
  const next = lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: 0 });
  const first = await cut;
  setTimeout(() => first.end(), 20); // the cut PATCH's abort
  const second = await next;
  t.not(second.session, first.session, 'the next PATCH got the lock once the cut one ended');
});

test("a PATCH's begin: a wrong offset is refused with the record; the lock is taken once; a second begin waits, then 409", async (t) => {
  const { deps, store } = await setup(t);
  const { record } = await createUpload(deps, post());
  const wrong = await refusal(t, lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: 5 }));
  t.is(wrong.message, 'Invalid offset');
  t.like(wrong.data, { id: record!.id, offset: 0 });
  const lease = await lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: 0 });
  t.is(store.get(record!.id)!.lock!.session, lease.session);
  const busy = await refusal(t, lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: null }));
  t.is(busy.code, 'CONFLICT');
  t.is(busy.message, 'upload busy');
  lease.end();
  t.truthy(await lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: null }), 'free again once the session ended');
});

/** An upload whose finish was cut after it recorded the full size and before the rename: every byte on disk, not published. */
async function wholeButUnpublished(deps: UploadDeps, store: LmdbUploadStore, over: Partial<CreateUpload> = {}) {
  const { record } = await createUpload(deps, post(over));
  const u = store.get(record!.id)!;
  writeFileSync(u.part, '0123456789');
  // Its writer's lock: a replica no longer alive (replicaAlive is false here), lease not yet over.
  await store.write((w) => w.put({ ...u, offset: 10, lock: { owner: 'gone', session: 's-gone', until: Date.now() + 15_000 } }));
  return u;
}

test('a POST or a GET that finds an upload whole but not published (its finish cut) publishes it before answering the full size', async (t) => {
  // The chaos run's finding: a re-POST answered offset = file_size for such an upload (the client
  // takes that as done), and nothing published it: the file was missing at the end.
  const { deps, store, root, completed } = await setup(t);
  const byPost = await wholeButUnpublished(deps, store, { relativePath: 'p.txt' });
  const answer = await createUpload(deps, post({ relativePath: 'p.txt' }));
  t.true(answer.complete, 'answered as complete');
  t.like(answer.record, { id: byPost.id, offset: 10 });
  t.is(readFileSync(root.hostPath('alice', '/dest/p.txt'), 'utf8'), '0123456789', 'and the file is at its target when answered');
  t.is(store.get(byPost.id)!.state, 'done');

  const byGet = await wholeButUnpublished(deps, store, { relativePath: 'g.txt' });
  t.like(await getUpload(deps, 'alice', 'files', byGet.id), { offset: 10 });
  t.is(readFileSync(root.hostPath('alice', '/dest/g.txt'), 'utf8'), '0123456789');
  t.false(existsSync(byGet.part));
  t.deepEqual(completed.map((c) => c.path), ['/dest/p.txt', '/dest/g.txt'], 'each completion announced once');
});

test('hostile: a whole upload a live writer still holds is 409 upload busy, not reported whole; one that cannot land (conflict=fail) is its 409, the file there kept', async (t) => {
  const { deps, store, root } = await setup(t);
  const { record } = await createUpload(deps, post());
  const lease = (await deps.locks.take(record!.id, (u): u is NonNullable<typeof u> => u !== undefined, { touch: false }))!;
  const u = store.get(record!.id)!;
  writeFileSync(u.part, '0123456789');
  await store.write((w) => w.put({ ...u, offset: 10 })); // the writer recorded the full size, and stalls
  for (const asking of [getUpload(deps, 'alice', 'files', record!.id), createUpload(deps, post())]) {
    const busy = await refusal(t, asking);
    t.is(busy.code, 'CONFLICT');
    t.is(busy.message, 'upload busy');
  }
  t.false(existsSync(root.hostPath('alice', '/dest/a.txt')), 'nothing published under a live lock');
  lease.end();
  t.true((await createUpload(deps, post())).complete, 'published once the writer is gone');

  const blocked = await wholeButUnpublished(deps, store, { relativePath: 'taken.txt', conflict: 'fail' });
  writeFileSync(root.hostPath('alice', '/dest/taken.txt'), 'old');
  const refused = await refusal(t, getUpload(deps, 'alice', 'files', blocked.id));
  t.is(refused.code, 'CONFLICT');
  t.regex(refused.message, /conflict=fail/);
  t.is(readFileSync(root.hostPath('alice', '/dest/taken.txt'), 'utf8'), 'old', 'the file there is kept');
  t.is(store.get(blocked.id)!.state, 'active', 'and the upload stays unfinished');
});

test('hostile: askers at once on a whole unpublished upload (GETs, a re-POST): the file is published once, one event, no part left, nobody told to upload again', async (t) => {
  // A stranger's review found the repair let its lock go before publishing: a second asker then
  // published too, and heard 400 "upload the file again", or left an empty part behind.
  const { deps: plain, store, root, completed } = await setup(t);
  const u = await wholeButUnpublished(plain, store);
  const said = (p: Promise<unknown>) => p.catch((e: PierError) => `${e.code} ${e.message}`);
  // The others ask in the moment the first asker's repair has written its record, before it publishes.
  const others: Promise<unknown>[] = [];
  const watched: UploadStore = Object.create(store);
  watched.write = async (fn, options) => {
    const result = await store.write(fn, options);
    const r = result as { state?: string; offset?: number } | null;
    if (others.length === 0 && r?.state === 'active' && r.offset === 10) {
      others.push(said(getUpload(deps, 'alice', 'files', u.id).then((x) => x.offset)));
      others.push(said(createUpload(deps, post()).then((x) => (x.complete ? x.record!.offset : 'not complete'))));
    }
    return result;
  };
  const deps: UploadDeps = { ...plain, store: watched };
  const first = await said(getUpload(deps, 'alice', 'files', u.id).then((x) => x.offset));
  t.is(others.length, 2, 'the others asked while the first was publishing');
  const answers = [first, ...(await Promise.all(others))];
  for (const a of answers) t.true(a === 10 || a === 'CONFLICT upload busy', String(a));
  t.is(readFileSync(root.hostPath('alice', '/dest/a.txt'), 'utf8'), '0123456789');
  t.false(existsSync(u.part), 'no part left behind');
  t.is(completed.length, 1, 'announced once');
  t.like(store.get(u.id), { state: 'done', offset: 10 });
});

test('hostile: a writer that stalled past its lock while another replica published its upload is told it lost the lock (409), never "upload the file again"', async (t) => {
  const { deps: a, store, root, completed } = await setup(t);
  // Replica B over the same records, which takes A for dead (its heartbeats stopped: a pause).
  const b: UploadDeps = { ...a, busId: 'b', locks: new UploadLocks({ store, busId: 'b', now: Date.now, leaseMs: 15_000, settleWaitMs: 50, replicaAlive: () => false, announce: () => undefined }) };
  const { record } = await createUpload(a, post());
  const lease = (await a.locks.take(record!.id, (u): u is NonNullable<typeof u> => u !== undefined, { touch: true }))!;
  writeFileSync(lease.upload.part, '0123456789');
  // A's finish records the full size, then stalls; a GET on B meanwhile publishes the file.
  let bAnswered: unknown = null;
  const stalling: UploadStore = Object.create(store);
  stalling.write = async (fn, options) => {
    const result = await store.write(fn, options);
    bAnswered ??= await getUpload(b, 'alice', 'files', record!.id).then((r) => r.offset, (e: PierError) => e.message);
    return result;
  };
  const resumed = await finish({ ...a, store: stalling }, { ...lease.upload, offset: 10 }, lease).then(
    () => 'published',
    (e: PierError) => `${e.code} ${e.message}`,
  );
  lease.end();
  t.is(bAnswered, 10, 'B answered the full size once it had published');
  t.regex(resumed, /^CONFLICT upload busy: this PATCH was silent past its lock/);
  t.is(readFileSync(root.hostPath('alice', '/dest/a.txt'), 'utf8'), '0123456789');
  t.is(completed.length, 1);
});

test('a re-POST that waits for a PATCH finishing the file answers it complete, not a new upload of the same file', async (t) => {
  const { deps, store, root } = await setup(t, 3, 2_000);
  const { record } = await createUpload(deps, post());
  const lease = await lockForWrite(deps, { user: 'alice', app: 'files', id: record!.id, offset: 0 });
  writeFileSync(lease.upload.part, '0123456789');
  const rePost = createUpload(deps, post()); // waits for the PATCH in progress to settle
  await finish(deps, { ...lease.upload, offset: 10 }, lease);
  lease.end();
  const answer = await rePost;
  t.true(answer.complete);
  t.like(answer.record, { id: record!.id, offset: 10 });
  t.is(store.all().length, 1, 'no second upload');
  t.is(readFileSync(root.hostPath('alice', '/dest/a.txt'), 'utf8'), '0123456789');
});

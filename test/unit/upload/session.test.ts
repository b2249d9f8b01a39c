import test, { type ExecutionContext } from 'ava';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPart, partPathFor } from '../../../actors/upload/files.js';
import type { UploadDeps } from '../../../actors/upload/deps.js';
import { UploadRoot } from '../../../actors/upload/root.js';
import { UploadLocks } from '../../../actors/upload/lock.js';
import { WriteSession } from '../../../actors/upload/session.js';
import { LmdbUploadStore, type Upload } from '../../../actors/upload/store.js';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { sendPiece } from '../../../bus/byte-stream.js';
import type { PieceKind } from '../../../bus/subjects-stream.js';
import { at } from '../../../bus/exchange.js';
import { uploadStream, type UploadRecord } from '../../../bus/subjects.js';
import type { WireError } from '../../../bus/errors.js';
import { PierError } from '../../../bus/errors.js';
import type { UploadCompleted } from '../../../bus/subjects.js';
import { until, within } from '../../helpers/wait.js';

// One PATCH's write session on its own: pieces in order, acknowledged once written, fsynced and
// recorded at the end; out-of-order or oversized pieces refused without leaving bytes behind.
async function setup(t: { teardown: (fn: () => Promise<void>) => void }, fileSize: number, offset = 0, clock = { now: Date.now() }) {
  const dir = mkdtempSync(join(tmpdir(), 'pier-session-'));
  const root = new UploadRoot(join(dir, 'files'));
  const dest = root.hostPath('alice', '/dest');
  mkdirSync(dest, { recursive: true });
  const store = LmdbUploadStore.open(join(dir, 'records'));
  const bus = new MemoryBus();
  const completed: UploadCompleted[] = [];
  const part = partPathFor(dest, 'u1');
  await createPart(part, root.userFolder('alice'));
  const u: Upload = {
    id: 'u1', user: 'alice', app: 'files', storagePath: '/dest', relativePath: 'x.bin', fileType: '', fileSize, conflict: 'replace',
    offset, target: join(dest, 'x.bin'), part, state: 'active', createdAt: 0, updatedAt: 0, lock: null,
  };
  await store.write((w) => w.put(u));
  const ended: string[] = [];
  // The lock's end is announced to the other replicas: here, recorded.
  const locks = new UploadLocks({ store, busId: 'b1', now: () => clock.now, leaseMs: 15_000, settleWaitMs: 1_000, replicaAlive: () => false, announce: () => ended.push('end') });
  const lease = await locks.take('u1', (c): c is Upload => c !== undefined, { touch: false });
  const deps = { store, root, busId: 'b1', now: () => clock.now, chunkMaxBytes: 8, locks, completed: (e: UploadCompleted) => completed.push(e) } as unknown as UploadDeps;
  const session = new WriteSession({ ...deps, bus, idleMs: 10_000, wrote: () => undefined, failed: () => undefined }, lease!, Math.min(8, fileSize - offset), true);
  await session.start();
  let seq = 0;
  /**
   * Sessions a test may leave open, with their next piece number: each is ended at teardown, as the
   * edge does when its client goes away, else its 10 s idle timer would keep the worker alive 10 s
   * after the last test (a session already over is no longer there, and the abort is answered at once).
   */
  const started: { subject: string; seq: () => number }[] = [{ subject: session.subject, seq: () => seq }];
  /** The next PATCH's session (the lock taken again), started. */
  const nextSession = async () => {
    const next = await locks.take('u1', (c): c is Upload => c !== undefined, { touch: false });
    const s = new WriteSession({ ...deps, bus, idleMs: 10_000, wrote: () => undefined, failed: () => undefined }, next!, 8, true);
    await s.start();
    started.push({ subject: s.subject, seq: () => 0 });
    return s;
  };
  t.teardown(async () => {
    for (const s of started) await sendPiece(bus, at(uploadStream, s.subject), { seq: s.seq(), kind: 'abort', data: Buffer.alloc(0) }, 2_000);
    await bus.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  // Each answer as one object: `{ok: true, ...answer}` or `{ok: false, error}`.
  const send = (kind: PieceKind, text = '') =>
    sendPiece(bus, at(uploadStream, session.subject), { seq: seq++, kind, data: Buffer.from(text) }, 2_000).then((o): { ok: boolean; record?: UploadRecord; complete?: boolean; error?: WireError } => (o.ok ? { ok: true, ...o.data } : { ok: false, error: o.error.toWire() }));
  return { store, send, completed, target: u.target, part, ended, skip: () => seq++, root, nextSession, session };
}

test('pieces land at the offset; end records the offset; the last chunk publishes the file', async (t) => {
  const { store, send, completed, target, ended } = await setup(t, 6);
  t.deepEqual(await send('data', 'abc'), { ok: true });
  t.deepEqual(await send('data', 'def'), { ok: true });
  const done = await send('end');
  t.true(done.ok && done.complete);
  t.is(readFileSync(target, 'utf8'), 'abcdef');
  t.is(store.get('u1')!.state, 'done');
  t.deepEqual(completed, [{ user: 'alice', app: 'files', path: '/dest/x.bin', size: 6 }], 'the event names the path in the app view');
  t.deepEqual(ended, ['end']);
});

test('a piece out of order ends the session and keeps nothing of it', async (t) => {
  const { store, send, skip, part, nextSession } = await setup(t, 20);
  t.deepEqual(await send('data', 'abc'), { ok: true });
  skip();
  const refused = await send('data', 'xyz');
  t.false(refused.ok);
  t.regex(refused.error!.message, /^piece 2 out of order \(1 expected\)/);
  t.is(store.get('u1')!.offset, 0, 'the offset stays where the PATCH started');
  t.is(store.get('u1')!.lock, null, 'the lock is released');
  await nextSession();
  t.is(readFileSync(part).length, 0, 'the next session, holding the lock, starts from the recorded offset');
});

test('a chunk over the cap is refused; its bytes are not kept', async (t) => {
  const { store, send, part, nextSession } = await setup(t, 100);
  t.deepEqual(await send('data', '12345'), { ok: true });
  const over = await send('data', '6789');
  t.false(over.ok);
  t.is(over.error!.message, 'file: a chunk may carry at most 8 bytes');
  t.is(store.get('u1')!.offset, 0);
  await nextSession();
  t.is(readFileSync(part).length, 0);
});

/**
 * Another replica's PATCH takes over a lock whose lease ran out (its writer silent past the lease:
 * paused, or starved) and goes further; then the old session wakes and ends. A chaos run saw the
 * old session record its own, older offset over the newer one ("Invalid offset" naming 1 MiB right
 * after 6.25 MiB was acknowledged). A session that lost its lock must change nothing.
 */
async function takenOver(t: ExecutionContext) {
  const clock = { now: 1_000_000 };
  const s = await setup(t, 100, 0, clock);
  t.deepEqual(await s.send('data', 'abc'), { ok: true });
  clock.now += 16_000; // past the 15 s lease
  const other = new UploadLocks({ store: s.store, busId: 'b2', now: () => clock.now, leaseMs: 15_000, settleWaitMs: 1_000, replicaAlive: () => false, announce: () => undefined });
  const lease = (await other.take('u1', (c): c is Upload => c !== undefined && c.offset === 0, { touch: true }))!;
  t.truthy(lease, 'the lapsed lock can be taken by another replica');
  // The other session writes (the same file's bytes) and records offset 6.
  writeFileSync(s.part, 'abcdef');
  await s.store.write((w) => w.put({ ...w.get('u1')!, offset: 6, lock: null }));
  lease.end();
  return s;
}

test('a session that lost its lock records nothing when it ends (no offset taken back)', async (t) => {
  const { store, send, part } = await takenOver(t);
  const late = await send('end');
  t.false(late.ok, 'the late end is refused');
  t.is(late.error!.code, 'CONFLICT');
  t.regex(late.error!.message, /^upload busy/);
  t.is(store.get('u1')!.offset, 6, 'the newer offset stands');
  t.is(readFileSync(part, 'utf8'), 'abcdef');
});

test('a session that lost its lock cuts nothing back when it fails', async (t) => {
  const { store, send, skip, part } = await takenOver(t);
  skip();
  const refused = await send('data', 'xyz');
  t.false(refused.ok);
  t.is(store.get('u1')!.offset, 6);
  t.is(readFileSync(part, 'utf8'), 'abcdef', 'the bytes another session acknowledged stay');
});

test('a session that lost its lock refuses its next piece', async (t) => {
  const { store, send } = await takenOver(t);
  const next = await send('data', 'def');
  t.false(next.ok);
  t.is(next.error!.code, 'CONFLICT');
  t.is(store.get('u1')!.offset, 6);
});

/**
 * The last chunk's publication fails after its done record may have landed (a replicated store
 * answers 503 "outcome unknown"). A chaos run saw that error replaced by the fence's 409 (the done
 * record had released the lock, so recording the offset found it gone): the client heard a refusal
 * for an upload that had completed. The first error is the answer.
 */
test('a failure while publishing is answered as itself, not as a lost lock', async (t) => {
  const { store, send } = await setup(t, 6);
  const write = store.write.bind(store);
  store.write = async (fn) => {
    let done = false;
    const result = await write((w) => fn({ ...w, put: (u) => ((done ||= u.state === 'done'), w.put(u)) }));
    if (done) throw new PierError('UNAVAILABLE', 'the outcome of a write is unknown');
    return result;
  };
  t.deepEqual(await send('data', 'abcdef'), { ok: true });
  const end = await send('end');
  t.false(end.ok);
  t.is(end.error!.code, 'UNAVAILABLE');
  t.is(store.get('u1')!.state, 'done', 'the done record landed');
});

test('a session that lost its lock does not publish, even with every byte written', async (t) => {
  const clock = { now: 1_000_000 };
  const { store, send, target } = await setup(t, 3, 0, clock);
  t.deepEqual(await send('data', 'abc'), { ok: true });
  clock.now += 16_000; // past the 15 s lease: another replica takes the lock and is still writing
  const other = new UploadLocks({ store, busId: 'b2', now: () => clock.now, leaseMs: 15_000, settleWaitMs: 1_000, replicaAlive: () => false, announce: () => undefined });
  t.truthy(await other.take('u1', (c): c is Upload => c !== undefined, { touch: true }));
  const late = await send('end');
  t.false(late.ok);
  t.is(late.error!.code, 'CONFLICT');
  t.is(store.get('u1')!.state, 'active', 'still the other session\'s upload');
  t.is(store.get('u1')!.lock!.owner, 'b2');
  t.throws(() => readFileSync(target), { code: 'ENOENT' }, 'nothing published');
});

test('a piece is answered once its write has ended, not when it is issued: the edge reuses its memory after the answer', async (t) => {
  const { send, session, target } = await setup(t, 6);
  // A slow disk: the session's writes end only when the test says so.
  const fd = (session as unknown as { fd: { write: (...args: unknown[]) => Promise<unknown> } }).fd;
  const write = fd.write.bind(fd);
  const held: Array<() => void> = [];
  fd.write = (...args: unknown[]) => new Promise((resolve, reject) => held.push(() => write(...args).then(resolve, reject)));
  let answered = false;
  const first = send('data', 'abc').then((a) => ((answered = true), a));
  await until('the first write issued', () => held.length === 1);
  const second = send('data', 'def');
  await until('the second piece taken while the first write is held (writes run side by side)', () => held.length === 2);
  await new Promise((r) => setTimeout(r, 100));
  t.false(answered, 'no answer while its write is held');
  held.shift()!();
  t.deepEqual(await within('the first answer', first, 5_000), { ok: true });
  held.shift()!();
  t.deepEqual(await within('the second answer', second, 5_000), { ok: true });
  const done = await send('end');
  t.true(done.ok && done.complete);
  t.is(readFileSync(target, 'utf8'), 'abcdef');
});

import test from 'ava';
import { JetStreamUploadStore } from '../../actors/upload/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { uploadStoreSuite } from './upload-store-suite.js';
import type { Upload } from '../../actors/upload/store.js';
import { PierError } from '../../bus/errors.js';

// JetStream on one node (R1).
uploadStoreSuite(test, () => jetStreamReplicas(1, (js, manager, replicas) => JetStreamUploadStore.open(js, manager, { replicas, storage: 'shared-root' })));

test('hostile: a replica on another upload root never sees, counts or recovers the records of this one', async (t) => {
  const roots = ['root-a', 'root-b'];
  let opened = 0;
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamUploadStore.open(js, manager, { replicas, storage: roots[opened++ % 2] }));
  try {
    const u: Upload = { id: 'x1', user: 'alice', app: 'chat', storagePath: '/', relativePath: 'f', fileType: '', fileSize: 1, conflict: 'replace', offset: 0, target: '/f', part: '/f.part', state: 'active', createdAt: 1, updatedAt: 1, lock: null };
    // A record naming another storage, as a forged or foreign write would: stamped with the writer's own.
    await pair.a.write((w) => w.put({ ...u, storage: 'root-b' }));
    t.is(pair.a.get('x1')?.storage, 'root-a');
    const other = pair.b;
    await other.read(() => undefined);
    t.is(other.get('x1'), undefined);
    t.deepEqual(other.all(), []);
    t.is(other.unfinishedAt('alice', 'chat', '/f'), undefined);
    t.is(await other.write((w) => w.countUnfinished('alice', 'chat')), 0);
    t.is(pair.a.all().length, 1, 'the record is there, for its own storage');
  } finally {
    await pair.close();
  }
});

// A chaos run found an upload replica answering "Invalid offset" with the offset from before a
// PATCH another replica had acknowledged: its catch-up with the log ran out of time and it read
// on. A replica that cannot catch up now refuses (503) instead.
test('a replica that cannot catch up with the log refuses to read (503), never answers a state missing an acknowledged write', async (t) => {
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamUploadStore.open(js, manager, { replicas, storage: 'shared-root' }));
  t.teardown(() => pair.close());
  const u: Upload = { id: 'y1', user: 'alice', app: 'chat', storagePath: '/', relativePath: 'f', fileType: '', fileSize: 10, conflict: 'replace', offset: 0, target: '/f', part: '/f.part', state: 'active', createdAt: 1, updatedAt: 1, lock: null };
  await pair.a.write((w) => w.put(u));
  await pair.b.read(() => undefined);
  t.is(pair.b.get('y1')?.offset, 0);
  // b's follow of the log is lost (its node went away) and not yet re-attached.
  await (pair.b as unknown as { log: { follower: { close(): Promise<void> } } }).log.follower.close();
  await pair.a.write((w) => w.put({ ...u, offset: 4 }));
  const refused = await t.throwsAsync(pair.b.read(() => undefined), { instanceOf: PierError });
  t.is(refused!.code, 'UNAVAILABLE');
  t.is(pair.b.get('y1')?.offset, 0, 'its state is indeed behind: the refusal is what kept it from being read');
});

import { at } from '../../bus/exchange.js';
import { upload, uploadEvents, uploadNotices, uploadState, uploadStream, uploadSubjects } from '../../bus/subjects.js';
import { declareActor, opens } from '../../lib/runtime/actor-declaration.js';

/**
 * The upload actor on the bus (queue group `upload`), its role's rights; its implementation is
 * index.ts, loaded only where the role runs.
 */
export const uploadDeclaration = declareActor({
  role: 'upload',
  serves: {
    create: upload.create,
    get: upload.get,
    prepare: upload.prepare,
    begin: upload.begin,
    describe: upload.describe,
    list: upload.list,
    terminate: upload.terminate,
    // Each PATCH's pieces arrive on a subject of its own write session (session.ts), on this replica's.
    session: opens(at(uploadStream, (busId) => uploadSubjects.session(busId, '*'))),
  },
  hears: {
    // Another replica's session ended: who waits here on that upload looks again.
    released: uploadEvents.released,
  },
  emits: [uploadEvents.completed, uploadEvents.released],
  calls: [uploadNotices.deliver],
  jetstream: { streams: [], buckets: [], subjects: [], logs: [uploadState] },
});

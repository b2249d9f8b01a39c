import test from 'ava';
import { destConflict, destsNest, normalisedDest } from '../../../actors/registry/dest-nesting.js';

// docs/protocol.md "Upload" (amended 2026-11-23): two apps of one user whose `dest` folders nest are
// refused at install unless --shared-dest.

const ASK = 'install with --shared-dest if the two apps trust each other';

test('dests nest when equal or one is a path-segment prefix of the other', (t) => {
  t.true(destsNest('/data', '/data'), 'equal');
  t.true(destsNest('/data', '/data/chat'), 'outer first');
  t.true(destsNest('/data/chat', '/data'), 'inner first');
  t.true(destsNest('/data', '/data/chat/deep/er'), 'any depth');
});

test('a prefix of the text that is not a prefix of the path does not nest: /data and /database', (t) => {
  t.false(destsNest('/data', '/database'));
  t.false(destsNest('/database', '/data'));
  t.false(destsNest('/data/chat', '/data/chat2'));
  t.false(destsNest('/data/chat', '/data/files'), 'siblings');
});

test('/ nests with every dest, itself included', (t) => {
  for (const other of ['/', '/data', '/data/chat', '/x']) {
    t.true(destsNest('/', other), other);
    t.true(destsNest(other, '/'), other);
  }
});

test('trailing and doubled slashes and `.` segments do not hide a nesting', (t) => {
  t.is(normalisedDest('/data//chat/'), '/data/chat');
  t.is(normalisedDest('/./'), '/');
  t.is(normalisedDest('//'), '/');
  t.true(destsNest('/data/', '/data'));
  t.true(destsNest('/data//', '/data/./chat/'));
  t.true(destsNest('//', '/data'));
  t.false(destsNest('/data/', '/database/'));
});

test('the conflict names the other app and both dests, outer first, whichever was installed first', (t) => {
  t.deepEqual(destConflict('chat', '/data/chat', [{ app: 'files', dest: '/data' }]), {
    other: { app: 'files', dest: '/data' },
    message: `upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": ${ASK}`,
  });
  t.deepEqual(destConflict('files', '/data', [{ app: 'chat', dest: '/data/chat' }]), {
    other: { app: 'chat', dest: '/data/chat' },
    message: `upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": ${ASK}`,
  });
  t.deepEqual(destConflict('b', '/same/', [{ app: 'a', dest: '/same' }]), {
    other: { app: 'a', dest: '/same' },
    message: `upload.dest "/same" of app "b" is also the upload.dest of app "a": ${ASK}`,
  });
});

test('no conflict with disjoint dests, with no other app, or with the app itself (a reinstall)', (t) => {
  t.is(destConflict('chat', '/data/chat', [{ app: 'db', dest: '/database' }, { app: 'files', dest: '/data/files' }]), null);
  t.is(destConflict('chat', '/data/chat', []), null);
  t.is(destConflict('chat', '/data/chat', [{ app: 'chat', dest: '/data' }]), null);
});

test('dest: / is refused on its own, and names the other app when there is one', (t) => {
  const alone = destConflict('all', '/', []);
  t.is(alone?.other, undefined);
  t.regex(alone!.message, /^upload\.dest "\/" of app "all" encloses the user's whole folder.*--shared-dest/);
  t.deepEqual(destConflict('all', '/', [{ app: 'chat', dest: '/data/chat' }]), {
    other: { app: 'chat', dest: '/data/chat' },
    message: `upload.dest "/" of app "all" encloses "/data/chat" of app "chat": ${ASK}`,
  });
  t.is(destConflict('chat', '/data/chat', [{ app: 'all', dest: '/' }])?.other?.app, 'all', 'an installed / encloses a newcomer');
});

import test from 'ava';
import { UploadRoot } from '../../../actors/upload/root.js';

test("app paths map under the user's own folder, and cannot climb out of it by text", (t) => {
  const root = new UploadRoot('/srv/apps');
  t.is(root.hostPath('alice', '/data/chat'), '/srv/apps/alice/data/chat');
  t.is(root.hostPath('alice', '/'), '/srv/apps/alice');
  t.is(root.hostPath('alice', '/data/../../bob/data'), '/srv/apps/alice/bob/data');
  t.is(root.hostPath('alice', '/../../../etc'), '/srv/apps/alice/etc');
  t.is(root.appPath('alice', '/srv/apps/alice/data/chat/x.pdf'), '/data/chat/x.pdf');
});

test('a user name that is not one never becomes a path', (t) => {
  const root = new UploadRoot('/srv/apps');
  for (const user of ['..', '', 'a/b', 'Alice', '../bob']) t.throws(() => root.hostPath(user, '/x'), { message: /not a user name/ }, user);
  t.throws(() => new UploadRoot('relative/root'), { message: /absolute/ });
});

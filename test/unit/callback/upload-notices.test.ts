import test from 'ava';
import { PierError } from '../../../bus/errors.js';
import { inUploadDest, UploadNotices, uploadEvent, uploadTarget } from '../../../actors/callback/upload-notices.js';

const notice = { eventId: 'upload:abc', user: 'alice', app: 'files', path: '/data/files/a.bin', size: 4 };

test('upload notices: the target comes from the registry view; an app without upload.callback is refused; at most max wait', async (t) => {
  const apps: Record<string, unknown> = { 'alice/files': { host: '10.0.0.5', upload: { fileType: ['*'], dest: '/data', limitedSize: 1, callback: { url: '/uploaded', port: 3000 } } }, 'alice/plain': { host: 'h', upload: null } };
  const cache = { app: (user: string, app: string) => apps[`${user}/${app}`] as never };
  t.deepEqual(uploadTarget(cache, 'alice', 'files'), { host: '10.0.0.5', port: 3000, url: '/uploaded' });
  t.throws(() => uploadTarget(cache, 'alice', 'plain'), { instanceOf: PierError, message: /declares no upload\.callback/ });
  t.throws(() => uploadTarget(cache, 'alice', 'ghost'), { instanceOf: PierError });
  let release!: () => void;
  const settled: string[] = [];
  t.true(inUploadDest(cache, 'alice', 'files', '/data/a.bin'));
  for (const forged of ['/etc/passwd', '/data', '/database/x', '/data/../etc/x', 'data/a']) t.false(inUploadDest(cache, 'alice', 'files', forged), forged);
  const notices = new UploadNotices({ target: (u, a) => uploadTarget(cache, u, a), inDest: (u, a, p) => inUploadDest(cache, u, a, p), deliver: () => new Promise((r) => (release = () => r('delivered'))), settled: (o) => settled.push(o) }, 1);
  t.throws(() => notices.accept({ ...notice, path: '/etc/passwd' }), { message: /path: not inside/ });
  t.deepEqual(notices.accept({ ...notice, path: '/data/files/a.bin' }), { accepted: true });
  t.is((t.throws(() => notices.accept(notice), { instanceOf: PierError }) as PierError).code, 'RATE_LIMITED');
  release();
  await new Promise((r) => setImmediate(r));
  t.deepEqual(settled, ['delivered']);
  t.is(notices.waiting(), 0);
  t.like(uploadEvent(notice), { action: 'upload', connId: '', seq: 0, data: { path: '/data/files/a.bin', size: 4 } });
});

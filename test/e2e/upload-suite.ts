import type { TestFn } from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { cleanup, cli, tempDir } from '../helpers/pier.js';
import { multipart, UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

const MiB = 1024 * 1024;

/** The processes under test, whatever their shape: one process, or an upload actor apart over NATS. */
export interface UploadDeployment {
  uploadPort(): number;
  /** Environment for the CLI (admin URL and token). */
  cliEnv(): Record<string, string>;
  /** kill -9 of the process that writes uploads. */
  crashWriter(): Promise<void>;
  /** Starts it again on the same data. */
  restartWriter(): Promise<void>;
  stop(): Promise<void>;
}

/** Settings every deployment of this suite runs with: users' files under `<dir>/files`. */
export const suiteEnv = (dir: string) => ({ PIER_UPLOAD_CHUNK_BYTES: String(10 * MiB), PIER_UPLOAD_IDLE_MS: '3000', PIER_UPLOAD_ROOT: join(dir, 'files') });

/**
 * The upload contract (docs/protocol.md "Upload"), run against every deployment shape: the same
 * cases whether the upload actor shares the edge's process or sits in its own over NATS.
 */
export function uploadSuite(test: TestFn, deploy: (dir: string) => Promise<UploadDeployment>): void {
let deployment: UploadDeployment;
let dir: string;
let env: Record<string, string>;
let root: string;
const tokens: Record<string, string> = {};
const installs: Record<string, { uploadDir: string | null }> = {};
const clients: Record<string, UploadClient> = {};
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** Where a user's `/dest` (the app's view, the same manifest for every user) is on the host. */
const destOf = (user: string) => join(root, user, 'dest');
/** `storage_path` in the app's view. */
const DOCS = '/dest/docs';
const docsHost = () => join(destOf('alice'), 'docs');

/** Everything under a folder, for "nothing was written outside dest". */
function listTree(d: string): string[] {
  return readdirSync(d, { recursive: true, withFileTypes: false } as any).map(String).sort();
}

test.before(async () => {
  dir = tempDir();
  root = join(dir, 'files');
  deployment = await deploy(dir);
  env = deployment.cliEnv();
  for (const user of ['alice', 'bob']) {
    tokens[user] = (await cli(['user', 'add', user, '--json'], env)).json.token;
    const manifest = join(dir, 'files.yaml');
    writeFileSync(manifest, `metadata: { name: files }\nupload: { fileType: [bin, ".TXT", Pdf], dest: /dest, limitedSize: ${60 * MiB} }\n`);
    const r = await cli(['app', 'install', '--user', user, '--manifest', manifest, '--json'], env);
    if (r.code !== 0) throw new Error(r.stderr);
    installs[user] = r.json;
    mkdirSync(join(destOf(user), 'docs'), { recursive: true });
    clients[user] = new UploadClient(deployment.uploadPort(), `files.${user}.localhost`, tokens[user]);
  }
});

test.after.always(async () => {
  await deployment?.stop();
  cleanup(dir);
});

const alice = () => clients.alice;
const newUpload = async (rel: string, size: number, extra: Record<string, string> = {}) => {
  // Right after an install, the actor's cache may not know the app yet (404): that settles at once.
  return until(`the upload of ${rel} to be created`, async () => {
    const r = await alice().create({ storage_path: DOCS, file_relative_path: rel, file_type: 'bin', file_size: size, ...extra });
    if (r.status === 200) return r.json.data;
    if (r.status !== 404) throw new Error(JSON.stringify(r.json));
    return undefined;
  });
};

test('a 50 MiB file in 8 MiB chunks and a 3 MiB file in one chunk arrive byte-identical', async (t) => {
  const big = randomBytes(50 * MiB);
  const rec = await newUpload('big/fifty.bin', big.length);
  t.deepEqual(rec, { id: rec.id, offset: 0, file_relative_path: 'big/fifty.bin', file_type: 'bin', file_size: big.length, storage_path: DOCS });
  let last;
  for (let off = 0; off < big.length; off += 8 * MiB) {
    last = await alice().patch(rec.id, off, big.subarray(off, off + 8 * MiB));
    t.is(last.status, 200);
    t.is(last.json.message, off + 8 * MiB >= big.length ? 'File uploaded successfully' : 'Continue uploading');
    t.is(last.json.data.offset, Math.min(off + 8 * MiB, big.length));
  }
  t.is(sha(readFileSync(join(destOf('alice'), 'docs', 'big', 'fifty.bin'))), sha(big));

  const small = randomBytes(3 * MiB);
  const one = await newUpload('three.bin', small.length);
  const done = await alice().patch(one.id, 0, small);
  t.is(done.json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(join(destOf('alice'), 'docs', 'three.bin'))), sha(small));
  // Finished uploads take no more bytes.
  t.deepEqual((await alice().patch(one.id, small.length, Buffer.from('x'))).json, { code: 1, message: 'Invalid upload ID' });
});

test('the spec errors, exactly', async (t) => {
  const rec = await newUpload('errors.bin', 100);
  t.deepEqual(await alice().patch('no-such-id', 0, Buffer.from('x')), { status: 400, json: { code: 1, message: 'Invalid upload ID' } });
  t.deepEqual(await clients.bob.patch(rec.id, 0, Buffer.from('x')), { status: 400, json: { code: 1, message: 'Invalid upload ID' } }, "another user's upload");
  const wrong = await alice().patch(rec.id, 7, Buffer.from('x'));
  t.deepEqual(wrong, { status: 400, json: { code: 1, message: 'Invalid offset', data: { ...rec, offset: 0 } } });
  const past = await alice().patch(rec.id, 0, randomBytes(101));
  t.is(past.status, 400);
  t.is(past.json.message, 'file: the chunk goes past file_size (100 bytes)');
  t.is((await alice().get(rec.id)).json.data.offset, 0, 'a refused chunk leaves nothing behind');

  const fields = { storage_path: DOCS, file_relative_path: 'x.bin', file_type: 'bin', file_size: '10' };
  const cases: Array<[Record<string, string>, string]> = [
    [{ ...fields, file_size: String(61 * MiB) }, `file_size: must be at most ${60 * MiB} bytes`],
    [{ ...fields, file_type: 'exe' }, 'file_type: "exe" is not allowed (allowed: bin, .TXT, Pdf)'],
    [{ ...fields, file_size: '-1' }, 'file_size: must be a non-negative integer'],
    [{ ...fields, file_size: 'ten' }, 'file_size: must be a non-negative integer'],
    [{ ...fields, conflict: 'merge' }, 'conflict: must be one of replace, rename, fail'],
  ];
  for (const name of ['storage_path', 'file_relative_path', 'file_type', 'file_size']) {
    const partial = { ...fields };
    delete (partial as Record<string, string>)[name];
    cases.push([partial, `${name}: is required`]);
  }
  for (const [body, message] of cases) {
    const r = await alice().create(body);
    t.is(r.status, 400, message);
    t.deepEqual(r.json, { code: 1, message });
  }
  // Case-insensitive, a leading dot ignored, on both sides: the declared type and the name's extension.
  for (const [ok, name] of [['txt', 't-1.TXT'], ['.txt', 't-2.txt'], ['TXT', 't-3.Txt'], ['pdf', 't-4.PDF'], ['.PDF', 't-5.pdf']]) {
    t.is((await alice().create({ ...fields, file_relative_path: name, file_type: ok })).status, 200, `${ok} ${name}`);
  }
});

test('a chunk over the cap is refused and leaves the offset where it was', async (t) => {
  const rec = await newUpload('capped.bin', 20 * MiB);
  const r = await alice().patch(rec.id, 0, randomBytes(10 * MiB + 1));
  t.is(r.status, 400);
  t.deepEqual(r.json, { code: 1, message: `file: a chunk may carry at most ${10 * MiB} bytes` });
  t.is((await alice().get(rec.id)).json.data.offset, 0);
  t.is((await alice().patch(rec.id, 0, randomBytes(10 * MiB))).json.data.offset, 10 * MiB, 'exactly the cap is fine');
});

test('install answers the user\'s own upload folder, created', async (t) => {
  for (const user of ['alice', 'bob']) {
    t.is(installs[user].uploadDir, destOf(user));
    t.true(statSync(destOf(user)).isDirectory());
  }
});

test('hostile paths: all refused with 400, and nothing written outside dest', async (t) => {
  const outside = join(dir, 'outside');
  mkdirSync(outside, { recursive: true });
  symlinkSync(outside, join(destOf('alice'), 'docs', 'escape'));
  symlinkSync('/etc', join(destOf('alice'), 'etc-link'));
  mkdirSync(join(root, 'alice', 'not-dest'), { recursive: true });
  const before = listTree(outside);
  const hostile: Array<[string, string]> = [
    [DOCS, '../x.bin'],
    [DOCS, 'a/../../x.bin'],
    [DOCS, 'a/b/..'],
    [DOCS, '..'],
    [DOCS, './x.bin'],
    [DOCS, '/etc/passwd'],
    [DOCS, '//x.bin'],
    [DOCS, 'a\\..\\x.bin'],
    [DOCS, 'a/x\0.bin'],
    [DOCS, '%2e%2e/x.bin'],
    [DOCS, 'a/%2E%2E/%2e%2e/x.bin'],
    [DOCS, '..%2fx.bin'],
    [DOCS, 'escape/x.bin'],
    [DOCS, 'escape/deeper/'],
    ['/dest', 'etc-link/passwd'],
    ['/etc', 'passwd'],
    [outside, 'x.bin'],
    [docsHost(), 'x.bin'],
    ['/dest/docs/escape', 'x.bin'],
    ['docs', 'x.bin'],
    ['/dest/../..', 'x.bin'],
    ['/dest/../../bob/dest/docs', 'x.bin'],
    ['/', 'x.bin'],
    ['/not-dest', 'x.bin'],
    [DOCS, 'a//b.bin'],
    [DOCS, 'C:/x.bin'],
  ];
  for (const [storage, rel] of hostile) {
    const r = await alice().create({ storage_path: storage, file_relative_path: rel, file_type: 'bin', file_size: 4 });
    t.is(r.status, 400, `${storage} + ${JSON.stringify(rel)} → ${JSON.stringify(r.json)}`);
    t.is(r.json.code, 1);
    t.false(String(r.json.message).includes(root), `no host path in ${JSON.stringify(r.json)}`);
  }
  t.deepEqual(listTree(outside), before);
  t.deepEqual(listTree(join(root, 'bob')).filter((f) => f.endsWith('x.bin')), [], "nothing in bob's folder");
  t.false(existsSync(join(dir, 'x.bin')));
});

test('a folder swapped for a symlink between POST and the last PATCH: the upload fails, nothing lands outside', async (t) => {
  const outside = join(dir, 'swap-outside');
  mkdirSync(outside, { recursive: true });
  const data = randomBytes(2 * MiB);
  const rec = await newUpload('swap/inner/x.bin', data.length);
  t.is((await alice().patch(rec.id, 0, data.subarray(0, MiB))).status, 200);
  renameSync(join(docsHost(), 'swap'), join(docsHost(), 'swap-moved'));
  symlinkSync(outside, join(docsHost(), 'swap'));
  mkdirSync(join(outside, 'inner'));
  const last = await alice().patch(rec.id, MiB, data.subarray(MiB));
  t.is(last.status, 400, JSON.stringify(last.json));
  t.regex(last.json.message, /^file_relative_path: a folder on the way to the file was moved or replaced/);
  t.deepEqual(listTree(outside), ['inner'], 'nothing written through the symlink');
  t.false(existsSync(join(docsHost(), 'swap-moved', 'inner', 'x.bin')));
  t.deepEqual((await alice().get(rec.id)).json, { code: 1, message: 'Invalid upload ID' }, 'the failed upload is gone');
});

test("a part swapped for a symlink: Pier never writes through it", async (t) => {
  const victim = join(dir, 'victim.txt');
  writeFileSync(victim, 'precious');
  const rec = await newUpload('tampered.bin', 2 * MiB);
  t.is((await alice().patch(rec.id, 0, randomBytes(MiB))).status, 200);
  const part = join(destOf('alice'), '.pier-uploads', `${rec.id}.part`);
  rmSync(part);
  symlinkSync(victim, part);
  const r = await alice().patch(rec.id, MiB, randomBytes(MiB));
  t.is(r.status, 400, JSON.stringify(r.json));
  t.is(r.json.message, "the upload's partial data was moved or replaced: upload the file again");
  t.is(readFileSync(victim, 'utf8'), 'precious');
});

test('folders, zero-byte files, and two users with the same path', async (t) => {
  const folder = await alice().create({ storage_path: DOCS, file_relative_path: 'new/nested/folder/', file_type: 'bin', file_size: 0 });
  t.deepEqual(folder, { status: 200, json: { code: 0, message: 'success', data: { id: '', offset: 0, file_relative_path: 'new/nested/folder/', file_type: '', file_size: 0, storage_path: DOCS } } });
  t.true(statSync(join(destOf('alice'), 'docs', 'new', 'nested', 'folder')).isDirectory());

  const empty = await alice().create({ storage_path: DOCS, file_relative_path: 'empty.bin', file_type: 'bin', file_size: 0 });
  t.is(empty.status, 200);
  t.is(empty.json.data.offset, 0);
  t.is(statSync(join(destOf('alice'), 'docs', 'empty.bin')).size, 0);

  const a = randomBytes(2 * MiB);
  const b = randomBytes(2 * MiB);
  const [ra, rb] = await Promise.all([
    alice().create({ storage_path: DOCS, file_relative_path: 'same/report.bin', file_type: 'bin', file_size: a.length }),
    clients.bob.create({ storage_path: DOCS, file_relative_path: 'same/report.bin', file_type: 'bin', file_size: b.length }),
  ]);
  t.not(ra.json.data.id, rb.json.data.id);
  await Promise.all([alice().sendAll(ra.json.data.id, a, MiB), clients.bob.sendAll(rb.json.data.id, b, MiB)]);
  t.is(sha(readFileSync(join(destOf('alice'), 'docs', 'same', 'report.bin'))), sha(a));
  t.is(sha(readFileSync(join(destOf('bob'), 'docs', 'same', 'report.bin'))), sha(b));
});

test('an existing target: replaced by default, kept with conflict=rename or conflict=fail', async (t) => {
  const docs = docsHost();
  writeFileSync(join(docs, 'exists.bin'), 'old');
  const one = Buffer.from('new!');
  const r1 = await newUpload('exists.bin', one.length);
  await alice().patch(r1.id, 0, one);
  t.is(readFileSync(join(docs, 'exists.bin'), 'utf8'), 'new!');
  const r2 = await newUpload('exists.bin', 5, { conflict: 'rename' });
  await alice().patch(r2.id, 0, Buffer.from('third'));
  t.is(readFileSync(join(docs, 'exists.bin'), 'utf8'), 'new!');
  t.is(readFileSync(join(docs, 'exists (1).bin'), 'utf8'), 'third');
  const r3 = await alice().create({ storage_path: DOCS, file_relative_path: 'exists.bin', file_type: 'bin', file_size: 3, conflict: 'fail' });
  t.deepEqual(r3, { status: 409, json: { code: 1, message: 'the target file exists (conflict=fail)' } });
});

/** Bytes in an upload's part file so far (0 before it exists). */
const partSize = (id: string) => {
  const part = join(destOf('alice'), '.pier-uploads', `${id}.part`);
  return existsSync(part) ? statSync(part).size : 0;
};

/** Starts a PATCH whose body arrives slowly; `cut()` drops the connection mid-chunk. */
function slowPatch(id: string, offset: number, data: Buffer, sendBytes: number) {
  const mp = multipart([['upload_offset', String(offset)], ['file', data]]);
  const req = httpRequest({ host: '127.0.0.1', port: deployment.uploadPort(), method: 'PATCH', path: `/upload/${id}`, headers: { host: 'files.alice.localhost', 'x-authorization': tokens.alice, 'content-type': mp.contentType, 'content-length': mp.body.length } });
  req.on('error', () => undefined);
  req.write(mp.body.subarray(0, sendBytes));
  let status: Promise<number> = new Promise((resolve) => req.on('response', (res) => resolve(res.statusCode!)));
  return { status, cut: () => req.destroy(), finish: () => req.end(mp.body.subarray(sendBytes)) };
}

test.serial('one PATCH at a time (409 upload busy); a dropped client leaves no lock and the upload resumes byte-identical', async (t) => {
  const data = randomBytes(6 * MiB);
  const rec = await newUpload('aborted.bin', data.length);
  const first = slowPatch(rec.id, 0, data.subarray(0, 4 * MiB), 2 * MiB);
  // Its bytes reach the part file only once its PATCH holds the lock.
  await until('the slow PATCH to be writing (its bytes in the part file)', () => partSize(rec.id) > 0);
  const busy = await alice().patch(rec.id, 0, data.subarray(0, 10));
  t.deepEqual(busy, { status: 409, json: { code: 1, message: 'upload busy' } });
  first.cut();
  // The next PATCH after a dead one succeeds (as soon as the edge has told the actor).
  const offset: number = await until('a PATCH to be accepted after the dead one', async () => {
    const g = await alice().get(rec.id);
    const probe = await alice().patch(rec.id, g.json.data.offset, data.subarray(g.json.data.offset, g.json.data.offset + 1));
    if (probe.status === 200) return probe.json.data.offset;
    t.true(probe.status === 409 || probe.json.message === 'Invalid offset', JSON.stringify(probe.json));
    return undefined;
  });
  t.true(offset >= 1);
  const done = await alice().sendAll(rec.id, data, 2 * MiB, offset);
  t.is(done.json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(join(destOf('alice'), 'docs', 'aborted.bin'))), sha(data));
});

/** Re-POST of crash.bin, as a client resuming after a restart does (retrying while the writer comes back). */
function newUploadAgain(size: number) {
  return until('the re-POST to be answered by the restarted writer', async () => {
    const r = await alice().create({ storage_path: DOCS, file_relative_path: 'crash.bin', file_type: 'bin', file_size: size }).catch(() => null);
    return r?.status === 200 ? r.json.data : undefined;
  }, 30_000, 100);
}

test.serial('kill -9 mid-upload: after restart a re-POST returns the durable offset; the file is only ever whole', async (t) => {
  const data = randomBytes(9 * MiB);
  const rec = await newUpload('crash.bin', data.length);
  t.is((await alice().patch(rec.id, 0, data.subarray(0, 3 * MiB))).json.data.offset, 3 * MiB);
  const target = join(destOf('alice'), 'docs', 'crash.bin');
  const inflight = slowPatch(rec.id, 3 * MiB, data.subarray(3 * MiB, 6 * MiB), 2 * MiB);
  await until('the in-flight PATCH to be writing past the acknowledged offset', () => partSize(rec.id) > 3 * MiB);
  await deployment.crashWriter();
  inflight.cut();
  t.false(existsSync(target), 'no half-written target');
  await deployment.restartWriter();
  for (const user of ['alice', 'bob']) clients[user] = new UploadClient(deployment.uploadPort(), `files.${user}.localhost`, tokens[user]);
  const again = await newUploadAgain(data.length);
  t.is(again.id, rec.id, 'the same upload, resumed');
  t.is(again.offset, 3 * MiB, 'the acknowledged offset, not the bytes that were in flight');
  t.false(existsSync(target));
  // A replica that died may be counted alive for a few heartbeats: its lock answers busy until then.
  let done = await alice().sendAll(rec.id, data, 3 * MiB, again.offset);
  if (done.status === 409) {
    done = await until('the dead replica\'s lock to lapse', async () => {
      const r = await alice().sendAll(rec.id, data, 3 * MiB, (await alice().get(rec.id)).json.data.offset);
      return r.status === 409 ? undefined : r;
    }, 30_000, 200);
  }
  t.is(done.json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(target)), sha(data));
});

test.serial('idle uploads are swept with their bytes; one being written is not', async (t) => {
  const idle = await newUpload('idle.bin', 1000);
  await alice().patch(idle.id, 0, randomBytes(10));
  const active = await newUpload('active.bin', 4 * MiB);
  const data = randomBytes(4 * MiB);
  // Keep "active" busy with small PATCHes for longer than the idle limit (3 s).
  const end = Date.now() + 6_000;
  let off = 0;
  while (Date.now() < end) {
    const r = await alice().patch(active.id, off, data.subarray(off, off + 1024));
    t.is(r.status, 200);
    off = r.json.data.offset;
    await new Promise((res) => setTimeout(res, 200));
  }
  t.deepEqual((await alice().get(idle.id)).json, { code: 1, message: 'Invalid upload ID' });
  t.is((await alice().get(active.id)).json.data.offset, off);
  t.deepEqual(readdirSync(join(destOf('alice'), '.pier-uploads')).filter((f) => f.startsWith(idle.id)), []);
});

test('identity and CORS: token and Host required; the app origin only', async (t) => {
  const fields = { storage_path: DOCS, file_relative_path: 'who.bin', file_type: 'bin', file_size: 1 };
  t.is((await new UploadClient(deployment.uploadPort(), 'files.alice.localhost', 'pier_bogus').create(fields)).status, 401);
  t.is((await new UploadClient(deployment.uploadPort(), 'files.alice.localhost', tokens.bob).create(fields)).status, 403);
  t.is((await new UploadClient(deployment.uploadPort(), 'ghost.alice.localhost', tokens.alice).create(fields)).status, 404);
  const ok = await alice().create(fields, { origin: 'https://files.alice.localhost' });
  t.is(ok.status, 200);
  const pre = await fetch(`http://127.0.0.1:${deployment.uploadPort()}/upload/`, { method: 'OPTIONS', headers: { origin: 'http://evil.example' } });
  t.is(pre.status, 403);
});
}

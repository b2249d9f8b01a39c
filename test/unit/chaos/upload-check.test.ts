import test from 'ava';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { checkUploads, hostPathOf } from '../../../chaos/checks/upload.js';
import { History, type HistoryLine } from '../../../chaos/history.js';
import type { Verdict } from '../../../chaos/workload.js';

// The upload checker on synthetic histories and a temp upload root: a good run passes, and each
// broken promise (an offset taken back, a completed file missing or corrupted, a new upload for an
// unfinished one, bytes from a refused PATCH, a stray or torn file) is caught, by the right check.

const USER = 'chaos-upload';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const A = Buffer.alloc(100, 'a');
const B = Buffer.from(Array.from({ length: 70 }, (_, i) => i));

const CHECKS = {
  files: 'upload: every completed file is at its path, byte-identical',
  offsets: 'upload: no acknowledged offset taken back, none from nowhere',
  once: 'upload: no file completed twice with different contents',
  strays: 'upload: files of unknown outcome absent or whole, no strays',
};

/** A History in a temp folder, and the upload root beside it. */
function fixture() {
  const dir = mkdtempSync(join(tmpdir(), 'pier-upload-check-'));
  const root = join(dir, 'uploads');
  mkdirSync(join(root, USER, 'chaos'), { recursive: true });
  const h = new History(join(dir, 'history.jsonl'));
  const put = (path: string, data: Buffer) => {
    const where = hostPathOf(root, USER, path);
    mkdirSync(dirname(where), { recursive: true });
    writeFileSync(where, data);
  };
  return { dir, root, h, put };
}

/** One request, invoked and answered. */
function req(h: History, op: string, fields: Record<string, unknown>, phase: 'ok' | 'fail' | 'unknown', answer: Record<string, unknown> = {}) {
  const id = h.invoke('upload', op, fields);
  h[phase]('upload', op, id, { file: fields.file, uploadId: fields.uploadId, ...answer });
}

/**
 * A run that keeps every promise: f0 (100 bytes) sent in 40-byte chunks with a PATCH of unknown
 * outcome in the middle (kept: the re-POST answers 80) and an `Invalid offset`; f1 (70 bytes) whose
 * last PATCH's answer is lost, so the re-POST answers a new upload and a GET shows the old one whole.
 */
function good(h: History) {
  h.info('upload', 'setup', { user: USER, app: 'chaosup', dest: '/chaos' });
  h.info('upload', 'file', { file: 'f0', user: USER, path: '/chaos/u0/f0.bin', size: 100, sha256: sha(A) });
  req(h, 'post', { file: 'f0' }, 'ok', { uploadId: 'A', offset: 0 });
  req(h, 'patch', { file: 'f0', uploadId: 'A', from: 0, length: 40 }, 'ok', { offset: 40, complete: false });
  req(h, 'patch', { file: 'f0', uploadId: 'A', from: 40, length: 40 }, 'unknown', { error: 'timeout' });
  req(h, 'post', { file: 'f0' }, 'ok', { uploadId: 'A', offset: 80 });
  req(h, 'patch', { file: 'f0', uploadId: 'A', from: 40, length: 40 }, 'fail', { status: 400, message: 'Invalid offset', offset: 80 });
  req(h, 'patch', { file: 'f0', uploadId: 'A', from: 80, length: 20 }, 'ok', { offset: 100, complete: true });
  h.info('upload', 'completed', { file: 'f0', uploadId: 'A', user: USER, path: '/chaos/u0/f0.bin', size: 100, sha256: sha(A), via: 'patch' });

  h.info('upload', 'file', { file: 'f1', user: USER, path: '/chaos/u0/f1.bin', size: 70, sha256: sha(B) });
  req(h, 'post', { file: 'f1' }, 'ok', { uploadId: 'C', offset: 0 });
  req(h, 'patch', { file: 'f1', uploadId: 'C', from: 0, length: 70 }, 'unknown', { error: 'socket hang up' });
  req(h, 'post', { file: 'f1' }, 'ok', { uploadId: 'D', offset: 0 });
  req(h, 'get', { file: 'f1', uploadId: 'C' }, 'ok', { offset: 70 });
  h.info('upload', 'completed', { file: 'f1', uploadId: 'C', user: USER, path: '/chaos/u0/f1.bin', size: 70, sha256: sha(B), via: 'get' });
}

async function run(f: ReturnType<typeof fixture>): Promise<Record<keyof typeof CHECKS, Verdict>> {
  await f.h.close();
  const verdicts = await checkUploads(f.h.lines as HistoryLine[], { uploadRoot: f.root });
  rmSync(f.dir, { recursive: true, force: true });
  const by = (name: string) => verdicts.find((v) => v.check === name)!;
  return { files: by(CHECKS.files), offsets: by(CHECKS.offsets), once: by(CHECKS.once), strays: by(CHECKS.strays) };
}

const anomalies = (v: Record<string, Verdict>) => Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x.anomalies]));
const clean = { files: [], offsets: [], once: [], strays: [] };

test('a good history with its files on disk passes every check, and each check looked at something', async (t) => {
  const f = fixture();
  good(f.h);
  f.put('/chaos/u0/f0.bin', A);
  f.put('/chaos/u0/f1.bin', B);
  mkdirSync(join(f.root, USER, 'chaos', '.pier-uploads'));
  writeFileSync(join(f.root, USER, 'chaos', '.pier-uploads', 'D.part'), 'partial bytes are not files');
  const v = await run(f);
  t.deepEqual(anomalies(v), clean);
  t.deepEqual(
    Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x.checked])),
    { files: 2, offsets: 8, once: 2, strays: 2 },
  );
});

test('an offset lower than one already acknowledged is caught', async (t) => {
  const f = fixture();
  good(f.h);
  f.put('/chaos/u0/f0.bin', A);
  f.put('/chaos/u0/f1.bin', B);
  // After the completion answered 100, a GET of A answers 40: acknowledged bytes taken back.
  req(f.h, 'get', { file: 'f0', uploadId: 'A' }, 'ok', { offset: 40 });
  const v = await run(f);
  t.deepEqual(anomalies(v), { ...clean, offsets: ['upload A: get ok (line 26) answered offset 40 after patch ok (line 13) had acknowledged 100'] });
});

test('a completed file that is missing, shorter or corrupted is caught', async (t) => {
  const missing = fixture();
  good(missing.h);
  missing.put('/chaos/u0/f1.bin', B);
  t.deepEqual(anomalies(await run(missing)), { ...clean, files: ['f0 (/chaos/u0/f0.bin, upload A, completed via patch at line 14) is missing'] });

  const short = fixture();
  good(short.h);
  short.put('/chaos/u0/f0.bin', A);
  short.put('/chaos/u0/f1.bin', B.subarray(0, 69));
  t.deepEqual(anomalies(await run(short)), { ...clean, files: ['f1 (/chaos/u0/f1.bin, upload C) has 69 bytes, 70 acknowledged'] });

  const corrupt = fixture();
  good(corrupt.h);
  const bad = Buffer.from(A);
  bad[50] = 0x62;
  corrupt.put('/chaos/u0/f0.bin', bad);
  corrupt.put('/chaos/u0/f1.bin', B);
  t.deepEqual(anomalies(await run(corrupt)), { ...clean, files: [`f0 (/chaos/u0/f0.bin, upload A) differs: sha256 ${sha(bad).slice(0, 12)}…, ${sha(A).slice(0, 12)}… uploaded`] });
});

test('a re-POST that answers a new upload while the old one is unfinished is caught', async (t) => {
  const f = fixture();
  good(f.h);
  f.put('/chaos/u0/f0.bin', A);
  f.put('/chaos/u0/f1.bin', B);
  f.h.info('upload', 'file', { file: 'f2', user: USER, path: '/chaos/u0/f2.bin', size: 100, sha256: sha(A) });
  req(f.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'E', offset: 0 });
  req(f.h, 'patch', { file: 'f2', uploadId: 'E', from: 0, length: 40 }, 'ok', { offset: 40, complete: false });
  req(f.h, 'patch', { file: 'f2', uploadId: 'E', from: 40, length: 40 }, 'unknown', { error: 'timeout' });
  req(f.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'F', offset: 0 });
  req(f.h, 'patch', { file: 'f2', uploadId: 'E', from: 40, length: 40 }, 'fail', { status: 400, message: 'Invalid upload ID' });
  const v = await run(f);
  t.deepEqual(anomalies(v), {
    ...clean,
    offsets: [
      'upload E: patch answered "Invalid upload ID" (line 35) for an upload nothing completed (acknowledged to 40)',
      'f2: a re-POST answered a new upload F at offset 0 while upload E (acknowledged to 40) was unfinished',
    ],
  });
});

test('an offset no PATCH could have written (a refused one counted, a PATCH acknowledged short) is caught', async (t) => {
  const f = fixture();
  good(f.h);
  f.put('/chaos/u0/f0.bin', A);
  f.put('/chaos/u0/f1.bin', B);
  f.h.info('upload', 'file', { file: 'f2', user: USER, path: '/chaos/u0/f2.bin', size: 100, sha256: sha(A) });
  req(f.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'E', offset: 0 });
  req(f.h, 'patch', { file: 'f2', uploadId: 'E', from: 0, length: 40 }, 'fail', { status: 409, message: 'upload busy' });
  req(f.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'E', offset: 40 });
  req(f.h, 'patch', { file: 'f2', uploadId: 'E', from: 40, length: 40 }, 'ok', { offset: 60, complete: false });
  const v = await run(f);
  t.deepEqual(anomalies(v), {
    ...clean,
    offsets: [
      'upload E: post ok (line 31) answered offset 40, which no PATCH that was not refused could have written',
      'upload E: PATCH at 40 of 40 bytes accepted with offset 60 (line 33), not 80',
    ],
  });
});

test('one path completed with two contents, a torn file of unknown outcome, a stray file: each caught', async (t) => {
  const twice = fixture();
  good(twice.h);
  twice.put('/chaos/u0/f0.bin', A);
  twice.put('/chaos/u0/f1.bin', B);
  twice.h.info('upload', 'completed', { file: 'f0', uploadId: 'G', user: USER, path: '/chaos/u0/f0.bin', size: 100, sha256: sha(Buffer.alloc(100, 'z')), via: 'patch' });
  const v = await run(twice);
  t.deepEqual(v.once.anomalies, [`${USER}:/chaos/u0/f0.bin completed 2 times with 2 contents (uploads A, G)`, `${USER}:/chaos/u0/f0.bin: completed with other contents than the file declared`]);

  const torn = fixture();
  good(torn.h);
  torn.put('/chaos/u0/f0.bin', A);
  torn.put('/chaos/u0/f1.bin', B);
  torn.h.info('upload', 'file', { file: 'f2', user: USER, path: '/chaos/u0/f2.bin', size: 100, sha256: sha(A) });
  req(torn.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'E', offset: 0 });
  req(torn.h, 'patch', { file: 'f2', uploadId: 'E', from: 0, length: 100 }, 'unknown', { error: 'timeout' });
  torn.put('/chaos/u0/f2.bin', A.subarray(0, 60));
  torn.put('/chaos/u0/f3.bin', A);
  t.deepEqual(anomalies(await run(torn)), { ...clean, strays: ['f2 (/chaos/u0/f2.bin), of unknown completion, is there but not whole', 'chaos-upload/chaos/u0/f3.bin: a file no upload was declared for'] });

  // The same file, whole, is fine: its PATCH may have completed it.
  const whole = fixture();
  good(whole.h);
  whole.put('/chaos/u0/f0.bin', A);
  whole.put('/chaos/u0/f1.bin', B);
  whole.h.info('upload', 'file', { file: 'f2', user: USER, path: '/chaos/u0/f2.bin', size: 100, sha256: sha(A) });
  req(whole.h, 'post', { file: 'f2' }, 'ok', { uploadId: 'E', offset: 0 });
  req(whole.h, 'patch', { file: 'f2', uploadId: 'E', from: 0, length: 100 }, 'unknown', { error: 'timeout' });
  whole.put('/chaos/u0/f2.bin', A);
  t.deepEqual(anomalies(await run(whole)), clean);
});

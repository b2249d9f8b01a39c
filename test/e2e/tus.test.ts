import test from 'ava';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as tus from 'tus-js-client';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { TusRaw } from '../helpers/tus-raw.js';
import { until, within } from '../helpers/wait.js';

// docs/upload.md "tus 1.0 (`/tus/`)": tus 1.0 on the upload listener, driven by the real tus-js-client from
// npm, unmodified. One `pier start` (the embedded shape); `chat` of alice takes .bin and .txt files.
const CHILD = fileURLToPath(new URL('../helpers/tus-child.js', import.meta.url));
const HOST = 'chat.alice.localhost';
let dir: string;
let pier: PierProcess;
let token: string;
let destHost: string;
let raw: TusRaw;
let endpoint: string;

test.before(async () => {
  dir = tempDir('pier-tus-');
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\nupload: { fileType: [bin, txt], dest: /data/chat, limitedSize: 268435456 }\n');
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  destHost = installed.json.uploadDir;
  endpoint = `http://127.0.0.1:${pier.ports!.upload}/tus/`;
  raw = new TusRaw(pier.ports!.upload, HOST, token);
  await until('the upload actor to know the app', async () => (await raw.send('OPTIONS', '/tus/')).headers['tus-max-size']);
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

// Once in CI a PATCH here met a connection closed without an answer, and nothing said why: a
// failing test shows Pier's state, what it logged above info, and its stderr.
test.afterEach.always((t) => {
  if (!t.passed && pier) t.log(pier.report());
});

const idOf = (upload: tus.Upload) => upload.url!.replace(/^.*\/tus\//, '');

/** One upload with tus-js-client in this process; resolves with the upload once it succeeded. */
function tusUpload(file: Buffer, options: Partial<tus.UploadOptions>): Promise<tus.Upload> {
  return within(
    'tus-js-client to finish the upload',
    new Promise((resolve, reject) => {
      const upload: tus.Upload = new tus.Upload(file, {
        endpoint,
        headers: { Host: HOST, 'X-Authorization': token },
        // As tus-js-client is configured in an app: a network error is retried (a kept-alive
        // connection the server closed as it was reused, say); an HTTP refusal is not.
        retryDelays: [0, 300, 1000],
        ...options,
        onSuccess: () => resolve(upload),
        onError: reject,
      });
      upload.start();
    }),
    60_000,
  );
}

test('tus-js-client uploads a file in chunks: byte-identical at its target, its fingerprint removed on success', async (t) => {
  const data = randomBytes(3 * 1024 * 1024 + 17);
  const urls = new Map<string, string>();
  const storage: tus.UrlStorage = {
    findAllUploads: async () => [],
    findUploadsByFingerprint: async () => [],
    removeUpload: async (key) => void urls.delete(key),
    addUpload: async (fingerprint, u) => {
      const key = `k-${urls.size}`;
      urls.set(key, `${fingerprint} ${u.uploadUrl}`);
      return key;
    },
  };
  const progress: number[] = [];
  const upload = await tusUpload(data, {
    chunkSize: 1024 * 1024,
    metadata: { filename: 'first.bin', filetype: 'application/octet-stream' },
    storeFingerprintForResuming: true,
    removeFingerprintOnSuccess: true,
    urlStorage: storage,
    onProgress: (sent) => progress.push(sent),
  });
  t.deepEqual(readFileSync(join(destHost, 'first.bin')), data, 'the file is whole at dest/first.bin');
  t.is(urls.size, 0, 'the stored URL was removed on success');
  t.true(progress.length >= 4 && progress.at(-1) === data.byteLength, `progress reported: ${progress.join(',')}`);
  const head = { id: idOf(upload), ...(await raw.head(idOf(upload))) };
  t.is(head.status, 200, 'a finished upload still answers HEAD, complete');
  t.is(head.headers['upload-offset'], String(data.byteLength));
  t.false('upload-expires' in head.headers, 'a finished upload does not expire');
  t.false(existsSync(join(destHost, '.pier-uploads', `${head.id}.part`)), 'no partial file is left in dest');
});

test('tus-js-client killed mid-chunk, then a new client resumes from the stored URL (not from zero): byte-identical', async (t) => {
  const file = join(dir, 'big.bin');
  const data = randomBytes(48 * 1024 * 1024);
  writeFileSync(file, data);
  const options = { endpoint, host: HOST, token, file, storage: join(dir, 'tus-urls.json'), chunkSize: 16 * 1024 * 1024, filename: 'big.bin' };

  // First client: kills itself (SIGKILL) once it has sent more than a chunk and a half, i.e. mid-chunk.
  const first = spawn(process.execPath, [CHILD, JSON.stringify({ ...options, resume: false, dieAfter: 24 * 1024 * 1024 })], { stdio: ['ignore', 'pipe', 'inherit'] });
  const firstEvents: Array<Record<string, unknown>> = [];
  await within(
    'the first client to kill itself past 24 MiB',
    new Promise<void>((resolve, reject) => {
      createInterface({ input: first.stdout }).on('line', (line) => {
        const e = JSON.parse(line) as Record<string, unknown>;
        firstEvents.push(e);
        if (e.done || e.error) reject(new Error(`the first client ended before it was killed: ${line}`));
      });
      first.once('exit', (_code, signal) => (signal === 'SIGKILL' ? resolve() : reject(new Error(`the first client exited with ${String(signal)}`))));
    }),
    60_000,
  );
  t.true(firstEvents.some((e) => typeof e.progress === 'number' && e.progress > 16 * 1024 * 1024), 'the first client was past its first chunk');
  t.false(existsSync(join(destHost, 'big.bin')), 'nothing at the target before the upload is complete');

  // A new client: finds the upload by its fingerprint and resumes it.
  const second = spawn(process.execPath, [CHILD, JSON.stringify({ ...options, resume: true })], { stdio: ['ignore', 'pipe', 'inherit'] });
  const events: Array<Record<string, unknown>> = [];
  await within(
    'the second client to finish',
    new Promise<void>((resolve, reject) => {
      createInterface({ input: second.stdout }).on('line', (line) => {
        const e = JSON.parse(line) as Record<string, unknown>;
        events.push(e);
        if (e.done) resolve();
        if (e.error) reject(new Error(`the resuming client failed: ${line}`));
      });
    }),
    60_000,
  );
  t.is(events.find((e) => 'previous' in e)?.previous, 1, 'the new client found the upload it had stored');
  t.false(events.some((e) => e.request === 'POST'), `the new client created nothing: ${JSON.stringify(events.filter((e) => e.request))}`);
  const firstPatch = events.find((e) => e.request === 'PATCH');
  t.true(Number(firstPatch?.offset) >= 16 * 1024 * 1024, `it resumed at ${String(firstPatch?.offset)}, after at least the first chunk`);
  t.is(createHash('sha256').update(readFileSync(join(destHost, 'big.bin'))).digest('hex'), createHash('sha256').update(data).digest('hex'), 'byte-identical');
});

test('tus-js-client terminates an upload (abort(true)): its URL answers 404 and its partial data is gone', async (t) => {
  const data = randomBytes(4 * 1024 * 1024);
  const upload = await new Promise<tus.Upload>((resolve, reject) => {
    const u: tus.Upload = new tus.Upload(data, {
      endpoint,
      headers: { Host: HOST, 'X-Authorization': token },
      chunkSize: 1024 * 1024,
      retryDelays: [0, 300, 1000],
      metadata: { filename: 'dropped.bin' },
      // Stopped after the first chunk is acknowledged.
      onChunkComplete: (_size, sent) => {
        if (sent === 1024 * 1024) resolve(u);
      },
      onError: reject,
    });
    u.start();
  });
  await within('the termination', upload.abort(true));
  t.is((await raw.head(idOf(upload))).status, 404, 'the terminated upload is not found');
  t.false(existsSync(join(destHost, '.pier-uploads', `${idOf(upload)}.part`)), 'its partial data is gone');
  t.false(existsSync(join(destHost, 'dropped.bin')), 'nothing at the target');
});

test('tus-js-client with Upload-Checksum on every PATCH (set in onBeforeRequest): accepted when right, 460 and nothing kept when wrong', async (t) => {
  const data = randomBytes(3 * 1024 * 1024);
  const chunk = 1024 * 1024;
  const checksum = (offset: number, alg: string) => `${alg} ${createHash(alg).update(data.subarray(offset, offset + chunk)).digest('base64')}`;
  let n = 0;
  await tusUpload(data, {
    chunkSize: chunk,
    metadata: { filename: 'summed.bin' },
    onBeforeRequest: (req) => {
      if (req.getMethod() === 'PATCH') req.setHeader('Upload-Checksum', checksum(Number(req.getHeader('Upload-Offset')), ['sha1', 'md5', 'sha256'][n++ % 3]!));
    },
  });
  t.is(n, 3, 'three PATCHes, each with its checksum (sha1, md5, sha256)');
  t.deepEqual(readFileSync(join(destHost, 'summed.bin')), data);

  // The second chunk's checksum is wrong: 460, and the upload stays at 1 MiB.
  let url = '';
  const err = await t.throwsAsync(
    tusUpload(data, {
      chunkSize: chunk,
      metadata: { filename: 'wrong-sum.bin' },
      onAfterResponse: (req) => {
        url = req.getURL();
      },
      onBeforeRequest: (req) => {
        if (req.getMethod() !== 'PATCH') return;
        const offset = Number(req.getHeader('Upload-Offset'));
        req.setHeader('Upload-Checksum', offset === chunk ? `sha256 ${createHash('sha256').update('not this').digest('base64')}` : checksum(offset, 'sha256'));
      },
    }),
  );
  t.regex(String(err?.message), /460/, 'tus-js-client reports the 460');
  const head = await raw.head(url.replace(/^.*\/tus\//, ''));
  t.is(head.headers['upload-offset'], String(chunk), 'the refused chunk was not kept');
  t.false(existsSync(join(destHost, 'wrong-sum.bin')));
});

test('tus-js-client with a deferred length (uploadLengthDeferred, from a stream): the length is declared with the last PATCH', async (t) => {
  const data = randomBytes(2 * 1024 * 1024 + 5);
  const { Readable } = await import('node:stream');
  await tusUpload(Readable.from([data.subarray(0, 1_000_000), data.subarray(1_000_000)]) as unknown as Buffer, {
    chunkSize: 512 * 1024,
    uploadLengthDeferred: true,
    metadata: { filename: 'streamed.bin' },
  });
  t.deepEqual(readFileSync(join(destHost, 'streamed.bin')), data);
});

test('OPTIONS tells the protocol, its extensions, checksums and the app\'s Tus-Max-Size', async (t) => {
  const a = await raw.send('OPTIONS', '/tus/');
  t.is(a.status, 204);
  t.is(a.headers['tus-version'], '1.0.0');
  t.is(a.headers['tus-extension'], 'creation,creation-with-upload,creation-defer-length,termination,expiration,checksum');
  t.is(a.headers['tus-checksum-algorithm'], 'sha1,md5,sha256');
  t.is(a.headers['tus-max-size'], '268435456');
});

test('creation-with-upload, HEAD (offset, length, metadata, no-store, expiry) and a PATCH to the end', async (t) => {
  const data = randomBytes(300_000);
  const created = await raw.create(data.byteLength, { filename: 'notes.txt', filetype: 'text/plain' }, { 'content-type': 'application/offset+octet-stream' });
  t.is(created.status, 201, created.text);
  t.is(created.headers['upload-offset'], '0', 'an empty creation body');
  const withBody = await raw.send('POST', '/tus/', { 'upload-length': String(data.byteLength), 'upload-metadata': `filename ${Buffer.from('withbody.bin').toString('base64')}`, 'content-type': 'application/offset+octet-stream' }, data.subarray(0, 100_000));
  t.is(withBody.status, 201, withBody.text);
  t.is(withBody.headers['upload-offset'], '100000', 'the creation carried the first 100,000 bytes');
  t.regex(withBody.headers['upload-expires'] ?? '', /GMT$/);
  const id = withBody.headers.location!.replace('/tus/', '');
  const head = await raw.head(id);
  t.is(head.status, 200);
  t.is(head.headers['upload-offset'], '100000');
  t.is(head.headers['upload-length'], String(data.byteLength));
  t.is(head.headers['cache-control'], 'no-store');
  t.is(head.headers['upload-metadata'], `filename ${Buffer.from('withbody.bin').toString('base64')}`);
  t.is(head.headers['tus-resumable'], '1.0.0');
  const last = await raw.patch(id, 100_000, data.subarray(100_000));
  t.is(last.status, 204, last.text);
  t.is(last.headers['upload-offset'], String(data.byteLength));
  t.deepEqual(readFileSync(join(destHost, 'withbody.bin')), data);
});

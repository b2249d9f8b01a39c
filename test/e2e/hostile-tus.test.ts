import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { metadataOf, TusRaw } from '../helpers/tus-raw.js';
import { multipart, UploadClient } from '../helpers/upload-client.js';
import { request } from 'undici';
import { until, within } from '../helpers/wait.js';

// docs/upload.md "tus 1.0 (`/tus/`)", as an attacker would try it: section 7's confinement and type rules
// through tus metadata, offsets and checksums that lie, two PATCHes at once, another user's or
// app's upload, the other protocol's ids, and malformed headers. One `pier start`.
let dir: string;
let pier: PierProcess;
let alice: TusRaw;
let bob: TusRaw;
let aliceNotes: TusRaw;
let carol: TusRaw;
let aliceUploads: UploadClient;
let destHost: string;
let notesHost: string;
// Per user and app; alice's own tests leave a few unfinished uploads, carol's test fills hers.
const MAX_UNFINISHED = 12;

test.before(async () => {
  dir = tempDir('pier-hostile-tus-');
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_UPLOAD_MAX_UNFINISHED: String(MAX_UNFINISHED) }));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\nupload: { fileType: [bin, txt], dest: /data/chat, limitedSize: 1048576 }\n');
  writeFileSync(join(dir, 'notes.yaml'), 'metadata: { name: notes }\nupload: { fileType: ["*"], dest: /data/notes }\n');
  const tokens: Record<string, string> = {};
  for (const user of ['alice', 'bob', 'carol']) {
    tokens[user] = (await cli(['user', 'add', user, '--json'], env)).json.token;
    const installed = await cli(['app', 'install', '--user', user, '--manifest', join(dir, 'chat.yaml'), '--json'], env);
    if (installed.code !== 0) throw new Error(installed.stderr);
    if (user === 'alice') destHost = installed.json.uploadDir;
  }
  notesHost = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'notes.yaml'), '--json'], env)).json.uploadDir;
  const port = pier.ports!.upload;
  alice = new TusRaw(port, 'chat.alice.localhost', tokens.alice!);
  bob = new TusRaw(port, 'chat.bob.localhost', tokens.bob!);
  carol = new TusRaw(port, 'chat.carol.localhost', tokens.carol!);
  aliceNotes = new TusRaw(port, 'notes.alice.localhost', tokens.alice!);
  aliceUploads = new UploadClient(port, 'chat.alice.localhost', tokens.alice!);
  for (const c of [alice, bob, carol, aliceNotes]) await until(`the upload actor to know ${c.host}`, async () => (await c.send('OPTIONS', '/tus/')).headers['tus-max-size']);
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

/** Everything under `root`, relative (what an escape would have added). */
function tree(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).sort();
}

test('section 7\'s confinement and type rules through Upload-Metadata: each refused with 400 naming the metadata, nothing written', async (t) => {
  mkdirSync(join(dir, 'outside'), { recursive: true });
  mkdirSync(destHost, { recursive: true });
  symlinkSync(join(dir, 'outside'), join(destHost, 'link'));
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ filename: 'a.bin', relativePath: '../escape.bin' }, /Upload-Metadata filename/],
    [{ filename: '/abs.bin' }, /Upload-Metadata filename/],
    [{ filename: 'sub\\x.bin' }, /Upload-Metadata filename/],
    [{ filename: 'a.bin', storage_path: '/etc' }, /Upload-Metadata storage_path/],
    [{ filename: 'a.bin', storage_path: '/data/chat/../..' }, /Upload-Metadata storage_path/],
    [{ filename: 'a.bin', storage_path: '/data/chat/link' }, /storage_path|link/],
    [{ filename: 'x.bin', relativePath: 'link/x.bin' }, /link|Upload-Metadata filename/],
    [{ filename: 'index.html', filetype: 'bin' }, /Upload-Metadata file/],
    [{ filename: 'index.html' }, /Upload-Metadata filetype/],
    [{ filename: 'a.bin', filetype: 'text/html' }, /Upload-Metadata filetype/],
    [{ filename: 'folder/' }, /Upload-Metadata filename/],
    [{ filetype: 'bin' }, /Upload-Metadata filename: is required/],
  ];
  for (const [meta, message] of cases) {
    const a = await alice.create(4, meta);
    t.is(a.status, 400, `${JSON.stringify(meta)}: ${a.text}`);
    t.regex(a.text, message, JSON.stringify(meta));
    t.false(/\/tmp|pier-hostile/.test(a.text), `no host path in "${a.text}"`);
  }
  t.deepEqual(tree(join(dir, 'outside')), [], 'nothing was written through the link');
  const names = ['escape.bin', 'abs.bin', 'a.bin', 'x.bin', 'index.html', 'sub\\x.bin'];
  t.deepEqual(tree(dir).filter((p) => names.some((n) => p.endsWith(n))), [], 'no file of these names anywhere');
});

test('malformed headers: 412, 413, 415 and 400s naming the header', async (t) => {
  const cases: Array<[string, string, Record<string, string>, number, RegExp]> = [
    ['POST', '/tus/', { 'tus-resumable': '0.2.2', 'upload-length': '4' }, 412, /Tus-Resumable/],
    ['POST', '/tus/', { 'upload-length': '1048577', 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 413, /Upload-Length: must be at most 1048576/],
    ['POST', '/tus/', { 'upload-length': '-1', 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 400, /Upload-Length/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-defer-length': '1', 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 400, /Upload-Length: is required/],
    ['POST', '/tus/', { 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 400, /Upload-Length: is required/],
    ['POST', '/tus/', { 'upload-defer-length': '2', 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 400, /Upload-Defer-Length/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-metadata': 'filename !!!' }, 400, /Upload-Metadata: the value of "filename" is not base64/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-metadata': `filename ${Buffer.from('a').toString('base64')},filename ${Buffer.from('b').toString('base64')}` }, 400, /appears twice/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-metadata': `filename ${Buffer.from('a\0.bin').toString('base64')}` }, 400, /not UTF-8 text/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-metadata': `filename ${Buffer.from('x'.repeat(5000)).toString('base64')}` }, 400, /at most 4096 bytes/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-concat': 'partial', 'upload-metadata': metadataOf({ filename: 'a.bin' }) }, 400, /Upload-Concat/],
    ['POST', '/tus/', { 'upload-length': '4', 'upload-metadata': metadataOf({ filename: 'a.bin', conflict: 'explode' }) }, 400, /Upload-Metadata conflict/],
  ];
  for (const [method, path, headers, status, message] of cases) {
    const a = await alice.send(method, path, headers);
    t.is(a.status, status, `${JSON.stringify(headers)}: ${a.text}`);
    t.regex(a.text, message, JSON.stringify(headers));
    t.is(a.headers['tus-resumable'], '1.0.0');
  }
  t.is((await alice.send('POST', '/tus/', { 'tus-resumable': '0.2.2' })).headers['tus-version'], '1.0.0', '412 says which version is served');
  const badFirstChunk = await alice.send('POST', '/tus/', { 'upload-length': '4', 'upload-metadata': metadataOf({ filename: 'first-chunk.bin' }), 'content-type': 'text/plain' }, Buffer.from('abcd'));
  t.is(badFirstChunk.status, 415, badFirstChunk.text);
  t.false('location' in badFirstChunk.headers, 'nothing was created for a creation refused for its body');
  const u = await alice.create(4, { filename: 'types.bin' });
  const wrongType = await alice.send('PATCH', `/tus/${u.id}`, { 'upload-offset': '0', 'content-type': 'application/octet-stream' }, Buffer.from('abcd'));
  t.is(wrongType.status, 415, wrongType.text);
  const noOffset = await alice.send('PATCH', `/tus/${u.id}`, { 'content-type': 'application/offset+octet-stream' }, Buffer.from('abcd'));
  t.is(noOffset.status, 400);
  t.regex(noOffset.text, /Upload-Offset: is required/);
  const badSum = await alice.patch(u.id, 0, Buffer.from('abcd'), { 'upload-checksum': 'crc32 AAAA' });
  t.is(badSum.status, 400);
  t.regex(badSum.text, /Upload-Checksum: the algorithm must be one of sha1, md5, sha256/);
  t.is((await alice.head(u.id)).headers['upload-offset'], '0', 'none of these wrote a byte');
});

test('a PATCH at the wrong offset is 409 (with the current offset); past the length is 400; neither keeps a byte', async (t) => {
  const u = await alice.create(10, { filename: 'offsets.bin' });
  t.is((await alice.patch(u.id, 0, Buffer.from('01234'))).status, 204);
  const behind = await alice.patch(u.id, 2, Buffer.from('xx'));
  t.is(behind.status, 409, behind.text);
  t.is(behind.headers['upload-offset'], '5');
  const ahead = await alice.patch(u.id, 7, Buffer.from('xx'));
  t.is(ahead.status, 409);
  const past = await alice.patch(u.id, 5, Buffer.from('56789-too-long'));
  t.is(past.status, 400, past.text);
  t.regex(past.text, /Upload-Length: the chunk goes past/);
  t.is((await alice.head(u.id)).headers['upload-offset'], '5');
  t.is((await alice.patch(u.id, 5, Buffer.from('56789'))).status, 204);
  t.is(readFileSync(join(destHost, 'offsets.bin'), 'utf8'), '0123456789');
  // The last answer lost, the client PATCHes again: 409 with the length, not 404: it is complete.
  const again = await alice.patch(u.id, 5, Buffer.from('56789'));
  t.is(again.status, 409, again.text);
  t.is(again.headers['upload-offset'], '10');
  t.is((await alice.patch(u.id, 10, Buffer.alloc(0))).status, 409);
  t.is(readFileSync(join(destHost, 'offsets.bin'), 'utf8'), '0123456789', 'the finished file is untouched');
});

test('two PATCHes at once on one upload: one wins (204), the other 409 or 423, and the file is exactly the winner\'s', async (t) => {
  for (let round = 0; round < 5; round++) {
    const size = 512 * 1024;
    const u = await alice.create(size, { filename: `race-${round}.bin` });
    const a = randomBytes(size);
    const b = randomBytes(size);
    const [ra, rb] = await Promise.all([alice.patch(u.id, 0, a), alice.patch(u.id, 0, b)]);
    const statuses = [ra.status, rb.status].sort();
    t.is(statuses[0], 204, `round ${round}: ${ra.status} ${ra.text} / ${rb.status} ${rb.text}`);
    t.true([409, 423].includes(statuses[1]!), `round ${round}: the loser got ${statuses[1]}`);
    const winner = ra.status === 204 ? a : b;
    t.deepEqual(readFileSync(join(destHost, `race-${round}.bin`)), winner, `round ${round}: the file is the winner's, whole`);
  }
});

/** A PATCH by hand on a raw socket: its head and the first `sent` bytes of a `length`-byte body, the rest left to the caller. */
async function openPatch(c: TusRaw, id: string, length: number, first: Buffer): Promise<Socket> {
  const socket = connect(c.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const head = [`PATCH /tus/${id} HTTP/1.1`, `host: ${c.host}`, `x-authorization: ${c.token}`, 'tus-resumable: 1.0.0', 'upload-offset: 0', 'content-type: application/offset+octet-stream', `content-length: ${length}`, '', ''].join('\r\n');
  socket.write(head);
  socket.write(first);
  return socket;
}

/** Everything a socket receives until it ends (or `ms` pass), as text. */
function answerOf(socket: Socket, ms: number): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const done = () => (clearTimeout(timer), resolve(got));
    const timer = setTimeout(done, ms);
    socket.on('data', (d) => (got += d));
    socket.once('end', done).once('close', done).once('error', done);
  });
}

test('a PATCH whose client goes away while it waits for the upload\'s lock takes nothing down: Pier answers, the holder finishes', async (t) => {
  // A CI run lost the whole process this way: the aborted body stream's error found no listener.
  const size = 64 * 1024;
  const data = randomBytes(size);
  const u = await alice.create(size, { filename: 'abort-while-waiting.bin' });
  const holder = await openPatch(alice, u.id, size, data.subarray(0, 1024));
  // The holder keeps sending, slowly (a client silent for 10 s is closed by uWS).
  let sent = 1024;
  const trickle = setInterval(() => {
    holder.write(data.subarray(sent, sent + 256));
    sent += 256;
  }, 250);
  t.teardown(() => clearInterval(trickle));
  await until('the holder\'s PATCH to hold the lock (another PATCH hears 409 upload busy)', async () => {
    const probe = await alice.patch(u.id, 0, Buffer.from('x'));
    return probe.status === 409 && /busy/.test(probe.text);
  }, 15_000);
  for (let i = 0; i < 5; i++) {
    // Each waits for the lock (up to the settle wait), and its client leaves meanwhile.
    const waiter = await openPatch(alice, u.id, size, data.subarray(0, 1024));
    await new Promise((r) => setTimeout(r, 200));
    waiter.destroy();
  }
  await new Promise((r) => setTimeout(r, 500));
  t.is((await alice.send('OPTIONS', '/tus/')).status, 204, 'Pier still answers');
  clearInterval(trickle);
  const answer = answerOf(holder, 15_000);
  holder.write(data.subarray(sent)); // not end(): uWS closes a half-closed connection before it answers
  t.regex(await answer, /^HTTP\/1\.1 204/, 'the holder\'s PATCH completes');
  t.deepEqual(readFileSync(join(destHost, 'abort-while-waiting.bin')), data, 'the file is whole');
  t.is(pier.proc.exitCode, null, 'the process is still running');
  holder.destroy();
});

test('a checksum mismatch answers 460 and keeps nothing; the right checksum then passes', async (t) => {
  const data = randomBytes(200_000);
  const u = await alice.create(data.byteLength, { filename: 'sum.bin' });
  const wrong = await alice.patch(u.id, 0, data, { 'upload-checksum': `sha1 ${createHash('sha1').update('other').digest('base64')}` });
  t.is(wrong.status, 460, wrong.text);
  t.is((await alice.head(u.id)).headers['upload-offset'], '0', 'nothing of the refused chunk was kept');
  const short = await alice.patch(u.id, 0, data, { 'upload-checksum': 'sha256 AAAA' });
  t.is(short.status, 400, 'a digest of the wrong length is malformed, not a mismatch');
  const right = await alice.patch(u.id, 0, data, { 'upload-checksum': `md5 ${createHash('md5').update(data).digest('base64')}` });
  t.is(right.status, 204, right.text);
  t.deepEqual(readFileSync(join(destHost, 'sum.bin')), data);
});

test('another user\'s, another app\'s, or the other protocol\'s upload is not there (404 / Invalid upload ID), and is left untouched', async (t) => {
  const u = await alice.create(8, { filename: 'mine.bin' });
  t.is((await alice.patch(u.id, 0, Buffer.from('mine'))).status, 204);
  for (const [who, c] of [['bob', bob], ['alice\'s notes app', aliceNotes]] as const) {
    t.is((await c.head(u.id)).status, 404, `${who}: HEAD`);
    t.is((await c.patch(u.id, 4, Buffer.from('evil'))).status, 404, `${who}: PATCH`);
    t.is((await c.send('DELETE', `/tus/${u.id}`)).status, 404, `${who}: DELETE`);
  }
  const platformGet = await aliceUploads.get(u.id);
  t.is(platformGet.status, 400, 'section 7\'s GET does not know a tus upload');
  t.is(platformGet.json.message, 'Invalid upload ID');
  t.is((await aliceUploads.patch(u.id, 4, Buffer.from('evil'))).json?.message, 'Invalid upload ID', 'nor does its PATCH');
  const platform = await until('a platform upload', async () => {
    const r = await aliceUploads.create({ storage_path: '/data/chat', file_relative_path: 'platform.bin', file_type: 'bin', file_size: 4 });
    return r.status === 200 ? r : undefined;
  });
  t.is((await alice.head(platform.json.data.id)).status, 404, 'tus does not know a platform upload');
  t.is((await alice.patch(platform.json.data.id, 0, Buffer.from('abcd'))).status, 404);
  const head = await alice.head(u.id);
  t.is(head.headers['upload-offset'], '4', 'alice\'s upload is as she left it');
  t.is((await alice.send('HEAD', '/tus/no-such-id')).status, 404);
  const anonymous = await alice.send('HEAD', `/tus/${u.id}`, { 'x-authorization': 'not-a-token' });
  t.is(anonymous.status, 401);
});

test('a deferred length: declared once, never below what is written nor above the cap; the upload completes when it is reached', async (t) => {
  const u = await alice.create(null, { filename: 'deferred.txt' });
  t.is(u.status, 201, u.text);
  const head = await alice.head(u.id);
  t.is(head.headers['upload-defer-length'], '1');
  t.false('upload-length' in head.headers);
  t.is((await alice.patch(u.id, 0, Buffer.from('hello '))).status, 204);
  t.is((await alice.patch(u.id, 6, Buffer.alloc(0), { 'upload-length': '3' })).status, 400, 'below what is written');
  t.is((await alice.patch(u.id, 6, Buffer.alloc(0), { 'upload-length': '1048577' })).status, 400, 'above the cap');
  t.false(existsSync(join(destHost, 'deferred.txt')));
  const last = await alice.patch(u.id, 6, Buffer.from('world'), { 'upload-length': '11' });
  t.is(last.status, 204, last.text);
  t.is(readFileSync(join(destHost, 'deferred.txt'), 'utf8'), 'hello world');
  const other = await alice.create(4, { filename: 'fixed.bin' });
  const change = await alice.patch(other.id, 0, Buffer.from('ab'), { 'upload-length': '2' });
  t.is(change.status, 400, 'a declared length cannot change');
  t.regex(change.text, /Upload-Length: the upload's length is 4/);
});

test('the unfinished-upload cap holds for tus creations (429), deferred ones included, and a termination frees a place', async (t) => {
  const made = [];
  for (let i = 0; i < MAX_UNFINISHED; i++) {
    const u = await carol.create(i === 0 ? null : 4, { filename: `cap-${i}.bin` });
    t.is(u.status, 201, u.text);
    made.push(u.id);
  }
  const over = await carol.create(4, { filename: 'cap-over.bin' });
  t.is(over.status, 429, over.text);
  t.is((await carol.send('DELETE', `/tus/${made[0]}`)).status, 204);
  t.is((await carol.create(4, { filename: 'cap-again.bin' })).status, 201, 'a terminated upload no longer counts');
});

test('CORS: the app\'s own origin may preflight and read the tus headers; another origin is refused', async (t) => {
  const origin = 'http://chat.alice.localhost';
  const pre = await alice.send('OPTIONS', '/tus/', { origin, 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'upload-offset, tus-resumable' });
  t.is(pre.status, 204);
  t.is(pre.headers['access-control-allow-origin'], origin);
  t.regex(pre.headers['access-control-allow-headers'] ?? '', /Upload-Offset/);
  t.regex(pre.headers['access-control-allow-methods'] ?? '', /PATCH/);
  const u = await alice.create(4, { filename: 'cors.bin' }, { origin });
  t.is(u.status, 201);
  t.regex(u.headers['access-control-expose-headers'] ?? '', /Location/);
  t.regex(u.headers['access-control-expose-headers'] ?? '', /Upload-Offset/);
  const evil = await alice.send('OPTIONS', '/tus/', { origin: 'http://evil.example', 'access-control-request-method': 'PATCH' });
  t.is(evil.status, 403);
  t.false('access-control-allow-origin' in evil.headers);
  const evilPost = await alice.create(4, { filename: 'evil.bin' }, { origin: 'http://evil.example' });
  t.is(evilPost.status, 403, 'a request from another origin is refused, not just unreadable');
});

test('reused body memory never mixes uploads: both protocols at once, odd-sized PATCHes, some cut mid-body and resumed, each file byte-identical', async (t) => {
  // The edge copies upload bodies into reused blocks (edge/http/block-pool.ts) and reuses a block
  // once the write session has written every chunk of it (and, for section 7's multipart bodies,
  // once busboy holds no slice of it: edge/upload/multipart-views.ts). Reused too early, one
  // upload's bytes would land in another's file: many uploads at once, cut ones among them, in both
  // protocols (one pool), make that likely to show.
  const files = Array.from({ length: 10 }, (_, i) => ({ name: `mixed-${i}.bin`, data: randomBytes(3 * 1024 * 1024 + 977 * i), tus: i < 6 }));
  const notes = new UploadClient(alice.port, 'notes.alice.localhost', alice.token);
  const offsetOf = async (id: string, tus: boolean) => {
    if (!tus) return Number((await notes.get(id)).json.data.offset);
    const h = await aliceNotes.head(id);
    if (h.status !== 200) throw new Error(`HEAD answered ${h.status}`);
    return Number(h.headers['upload-offset']);
  };
  /** A PATCH cut after half its body: the client goes away mid-chunk. */
  const cutPatch = async (id: string, tus: boolean, offset: number, chunk: Buffer) => {
    if (tus) {
      const socket = await openPatch(aliceNotes, id, chunk.length, chunk.subarray(0, chunk.length >> 1));
      await new Promise((r) => setTimeout(r, 20));
      socket.destroy();
      return;
    }
    const form = multipart([['upload_offset', String(offset)], ['file', chunk]]);
    const socket = connect(notes.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write([`PATCH /upload/${id} HTTP/1.1`, `host: ${notes.host}`, `x-authorization: ${notes.token}`, `content-type: ${form.contentType}`, `content-length: ${form.body.length}`, '', ''].join('\r\n'));
    socket.write(form.body.subarray(0, form.body.length >> 1));
    await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
  };
  /** One whole PATCH; section 7's with the file first in every other upload (the platform's own client's order). */
  const patch = async (id: string, tus: boolean, offset: number, chunk: Buffer, fileFirst: boolean): Promise<'ok' | 'busy'> => {
    if (tus) {
      const a = await aliceNotes.patch(id, offset, chunk);
      if (a.status === 409) return 'busy';
      t.is(a.status, 204, `tus at ${offset}: ${a.text}`);
      return 'ok';
    }
    const form = multipart(fileFirst ? [['file', chunk], ['upload_offset', String(offset)]] : [['upload_offset', String(offset)], ['file', chunk]]);
    const res = await request(`http://127.0.0.1:${notes.port}/upload/${id}`, { method: 'PATCH', headers: { host: notes.host, 'x-authorization': notes.token, 'content-type': form.contentType }, body: form.body });
    const answer = (await res.body.json()) as { code: number; message: string };
    if (res.statusCode === 409 || answer.message === 'Invalid offset') return 'busy';
    t.is(answer.code, 0, `section 7 at ${offset}: ${answer.message}`);
    return 'ok';
  };
  const upload = async ({ name, data, tus }: (typeof files)[number], i: number) => {
    let id: string;
    if (tus) id = (await aliceNotes.create(data.length, { filename: name })).id;
    else id = (await notes.create({ storage_path: '/data/notes', file_relative_path: name, file_type: '', file_size: data.length })).json.data.id;
    let offset = 0;
    let step = 0;
    while (offset < data.length) {
      const size = Math.min(data.length - offset, 300 * 1024 + 4099 * (step + i));
      step++;
      if (i % 2 === 1 && step % 3 === 1) {
        await cutPatch(id, tus, offset, data.subarray(offset, offset + size));
        offset = await offsetOf(id, tus);
        continue;
      }
      if ((await patch(id, tus, offset, data.subarray(offset, offset + size), i % 4 >= 2)) === 'busy') {
        // The cut PATCH still held the lock, or has since recorded what it wrote (the offset
        // moved): resumed from where the upload says it is.
        await new Promise((r) => setTimeout(r, 20));
        offset = await offsetOf(id, tus);
        continue;
      }
      offset += size;
    }
  };
  await within('every upload to finish', Promise.all(files.map(upload)), 120_000);
  for (const f of files) t.true(readFileSync(join(notesHost, f.name)).equals(f.data), `${f.name} (${f.tus ? 'tus' : 'section 7'}) is byte-identical`);
});

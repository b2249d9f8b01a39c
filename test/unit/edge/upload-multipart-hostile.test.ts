import test from 'ava';
import { Readable } from 'node:stream';
import { receiveBytes } from '../../../bus/byte-stream.js';
import { PierError } from '../../../bus/errors.js';
import { upload, uploadStream, type AppView, type PieceAnswer, type UploadRecord } from '../../../bus/subjects.js';
import type { PieceKind } from '../../../bus/subjects-stream.js';
import { uploadApi, type UploadApiDeps } from '../../../edge/upload/upload-api.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';
import { request, responder, stubBus } from '../../helpers/edge-stubs.js';
import { within } from '../../helpers/wait.js';

// A PATCH's multipart body as a hostile or unlucky client sends it (docs/protocol.md "Upload"): the
// boundary cut across the body's chunks at every byte, boundary-like bytes inside the file, parts
// after the file, a body cut short, oversized part headers, a client that goes away. The file's
// bytes reach the write session exactly, or the answer is a 4xx; never a crash or a hang.

const app = { id: 'alice/files', user: 'alice', name: 'files' } as AppView;
const B = 'XyZ';
const headers = { host: 'files.alice.example.com', 'x-authorization': 'pier_alice', 'content-type': `multipart/form-data; boundary=${B}` };
const CAP = 1024;

const field = (name: string, value: string) => `--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
const fileHead = (name = 'file') => `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`;
const END = `--${B}--\r\n`;

/** The form the platform's client sends: the file, then `upload_offset` (or the other way round). */
function body(data: Buffer, offsetFirst = false): Buffer {
  const file = Buffer.concat([Buffer.from(fileHead()), data, Buffer.from('\r\n')]);
  const offset = Buffer.from(field('upload_offset', '0'));
  return Buffer.concat(offsetFirst ? [offset, file, Buffer.from(END)] : [file, offset, Buffer.from(END)]);
}

/** The upload API over a stub bus whose write session keeps every byte it is sent and how it ended. */
function setup(t: Parameters<typeof stubBus>[0]) {
  const bus = stubBus(t);
  const cache = { userForToken: (tok: string) => (tok === 'pier_alice' ? 'alice' : undefined), app: (u: string, n: string) => (u === 'alice' && n === 'files' ? app : undefined) } as unknown as RegistryCache;
  const deps: UploadApiDeps = { bus, cache, domain: 'example.com', sidecarApp: null, chunkBytes: CAP, idleMs: 86_400_000 };
  const sessions: Array<{ bytes: Buffer[]; ended?: PieceKind }> = [];
  responder(bus, upload.begin, () => {
    const session: { bytes: Buffer[]; ended?: PieceKind } = { bytes: [] };
    sessions.push(session);
    const subject = `pier.upload.session.t${sessions.length}`;
    receiveBytes(bus, uploadStream, subject, async (piece): Promise<PieceAnswer> => {
      if (piece.kind === 'data') {
        session.bytes.push(Buffer.from(piece.data));
        return {};
      }
      session.ended = piece.kind;
      const offset = Buffer.concat(session.bytes).byteLength;
      return { record: { id: 'u1', offset, file_relative_path: 'a.bin', file_type: 'bin', file_size: 4 * CAP, storage_path: '/docs' } as UploadRecord, complete: false };
    });
    return { subject, offset: 0, maxBytes: CAP };
  });
  const api = uploadApi(deps);
  const append = (chunks: Buffer[] | Readable) => within('the PATCH to be answered', api.append(request({ method: 'patch', headers, params: { uid: 'u1' }, stream: Array.isArray(chunks) ? Readable.from(chunks) : chunks })), 10_000);
  return { api, append, sessions, written: (i = sessions.length - 1) => Buffer.concat(sessions[i]?.bytes ?? []) };
}

/** Data that is full of near-boundaries: none of them is the delimiter (CRLF, `--`, the boundary). */
const NEAR = Buffer.from(`a\r\n--${B.slice(0, 2)}b--${B}c\r\n-${B}d\r\n--${B.toLowerCase()}e\r--${B}f\n--${B}g\r\n\r\n--h\r\n--${B.slice(0, 2)}`);

test('the boundary split across two chunks at every offset: the file arrives byte for byte', async (t) => {
  const { append, sessions, written } = setup(t);
  for (const offsetFirst of [false, true]) {
    const form = body(NEAR, offsetFirst);
    for (let cut = 0; cut <= form.byteLength; cut++) {
      const reply = await append([form.subarray(0, cut), form.subarray(cut)]);
      t.is(reply.status, 200, `cut at ${cut}: ${JSON.stringify(reply.json)}`);
      t.true(written().equals(NEAR), `cut at ${cut}, offset first ${offsetFirst}`);
      t.is(sessions.at(-1)!.ended, 'end');
    }
  }
});

test('every byte its own chunk: the file arrives byte for byte', async (t) => {
  const { append, written } = setup(t);
  const form = body(NEAR);
  const reply = await append([...form].map((b) => Buffer.from([b])));
  t.is(reply.status, 200, JSON.stringify(reply.json));
  t.true(written().equals(NEAR));
});

test('a body cut short, anywhere: a 400, never a hang, never a chunk taken as whole', async (t) => {
  const { append, sessions } = setup(t);
  const form = body(NEAR);
  // Up to the closing delimiter `--XyZ--` itself: the CRLF after it is not needed to end the form.
  for (let cut = 0; cut < form.byteLength - 2; cut++) {
    const reply = await append([form.subarray(0, cut)]);
    t.is(reply.status, 400, `cut at ${cut}: ${JSON.stringify(reply.json)}`);
    // A body that ends before the form does is the parser's complaint or the missing field, never
    // "request aborted" (no client went away: the stream ended, it did not fail).
    t.regex(String((reply.json as { message: string }).message), /^(body: is not valid multipart\/form-data|upload_offset: is required|file: is required)/, `cut at ${cut}`);
  }
  t.false(sessions.some((s) => s.ended === 'end'), 'no session ends as a whole chunk');
});

test('the chunk cap: a file over it reaches the session one byte over the cap, no more', async (t) => {
  const { append, written } = setup(t);
  const big = Buffer.alloc(3 * CAP, 0x61);
  await append([body(big, true)]);
  t.is(written().byteLength, CAP + 1);
  const exact = Buffer.alloc(CAP, 0x62);
  const reply = await append([body(exact, true)]);
  t.is(reply.status, 200);
  t.true(written().equals(exact));
});

test('parts after the file: a second file and fields past the limit (8) are ignored; the upload_offset after the file counts', async (t) => {
  const { append, sessions, written } = setup(t);
  const data = Buffer.from('the one file');
  const extra = Array.from({ length: 20 }, (_, i) => field(`f${i}`, 'x')).join('');
  const form = Buffer.from(`${fileHead()}${data}\r\n${fileHead()}second file\r\n${field('upload_offset', '0')}${extra}${END}`);
  const reply = await append([form]);
  t.is(reply.status, 200, JSON.stringify(reply.json));
  t.true(written().equals(data));
  t.is(sessions.length, 1, 'one write session');
  // A file part under another name is not the file.
  const other = await append([Buffer.from(`${field('upload_offset', '0')}${fileHead('other')}bytes\r\n${END}`)]);
  t.deepEqual(other.json, { code: 1, message: 'file: is required' });
});

test('an oversized or malformed part header is a 400, not a crash or a hang', async (t) => {
  const { append } = setup(t);
  const long = `--${B}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nX-Pad: ${'p'.repeat(200 * 1024)}\r\n\r\nbytes\r\n${field('upload_offset', '0')}${END}`;
  const endless = `--${B}\r\nContent-Disposition: form-data; name="file"\r\nX-Pad: ${'p'.repeat(300 * 1024)}`;
  const noColon = `--${B}\r\nContent-Disposition form-data\r\n\r\nbytes\r\n${field('upload_offset', '0')}${END}`;
  for (const form of [long, endless, noColon]) {
    const reply = await append([Buffer.from(form)]);
    t.is(reply.status, 400, JSON.stringify(reply.json));
  }
});

test('a client that goes away mid-file: 400 request aborted, the session aborted, not ended', async (t) => {
  const { append, sessions } = setup(t);
  const form = body(Buffer.alloc(900, 0x63), true);
  const stream = new Readable({ read() {} });
  stream.on('error', () => undefined);
  stream.push(form.subarray(0, 400));
  const answer = append(stream);
  setTimeout(() => stream.destroy(new PierError('BAD_REQUEST', 'request aborted')), 50);
  const reply = await answer;
  t.is(reply.status, 400);
  t.deepEqual(reply.json, { code: 1, message: 'request aborted' });
  t.not(sessions.at(-1)?.ended, 'end');
});

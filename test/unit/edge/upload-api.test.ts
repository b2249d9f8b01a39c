import test from 'ava';
import { Readable } from 'node:stream';
import { PierError } from '../../../bus/errors.js';
import { upload, type AppView } from '../../../bus/subjects.js';
import { uploadApi, type UploadApiDeps } from '../../../edge/upload/upload-api.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';
import { request, responder, stubBus } from '../../helpers/edge-stubs.js';

// The upload listener (docs/protocol.md "Upload"): who calls (token and Host), the form's fields
// checked and named, then one upload actor request. Failures keep the spec's body, `code: 1`.

const app = { id: 'alice/files', user: 'alice', name: 'files' } as AppView;
const HOST = 'files.alice.example.com';
const headers = { host: HOST, 'x-authorization': 'pier_alice', 'content-type': 'multipart/form-data; boundary=XyZ' };

function form(fields: Record<string, string>): Buffer {
  const parts = Object.entries(fields).map(([k, v]) => `--XyZ\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  return Buffer.from(`${parts.join('')}--XyZ--\r\n`);
}

function setup(t: Parameters<typeof stubBus>[0]) {
  const bus = stubBus(t);
  const cache = { userForToken: (tok: string) => (tok === 'pier_alice' ? 'alice' : undefined), app: (u: string, n: string) => (u === 'alice' && n === 'files' ? app : undefined) } as unknown as RegistryCache;
  const deps: UploadApiDeps = { bus, cache, domain: 'example.com', sidecarApp: null, chunkBytes: 1024, idleMs: 86_400_000 };
  return { bus, api: uploadApi(deps) };
}

const file = { storage_path: '/docs', file_relative_path: 'a.txt', file_type: 'text/plain', file_size: '12' };

test('create: a missing or bad field is 400 with code 1 naming it, and never reaches the upload actor', async (t) => {
  const { bus, api } = setup(t);
  const asked = responder(bus, upload.create, () => ({ record: null, complete: false }));
  const create = (fields: Record<string, string>) => api.create(request({ method: 'post', headers, body: form(fields) }));
  t.deepEqual(await create({ ...file, storage_path: '' }), { status: 400, json: { code: 1, message: 'storage_path: is required' }, headers: {} });
  t.deepEqual((await create({ ...file, file_size: '-1' })).json, { code: 1, message: 'file_size: must be a non-negative integer' });
  t.deepEqual((await create({ ...file, conflict: 'merge' })).json, { code: 1, message: 'conflict: must be one of replace, rename, fail' });
  const { file_type: _, ...noType } = file;
  t.deepEqual((await create(noType)).json, { code: 1, message: 'file_type: is required' });
  t.deepEqual((await api.create(request({ method: 'post', headers: { ...headers, 'content-type': 'text/plain' }, body: 'x' }))).json, { code: 1, message: 'body: must be multipart/form-data' });
  t.is(asked.length, 0);
});

test('create: who calls is checked first: a foreign Host 404, no token 401, with code 1', async (t) => {
  const { api } = setup(t);
  t.deepEqual(await api.create(request({ method: 'post', headers: { ...headers, host: 'elsewhere.org' }, body: form(file) })), { status: 404, json: { code: 1, message: 'Host must be <app>.<user>.example.com' }, headers: {} });
  const { 'x-authorization': _, ...anonymous } = headers;
  t.is((await api.create(request({ method: 'post', headers: anonymous, body: form(file) }))).status, 401);
});

test('create: a file goes to upload.create as the caller; a folder entry is the empty path', async (t) => {
  const { bus, api } = setup(t);
  const asked = responder(bus, upload.create, (req) => ({ record: req.relativePath ? ({ id: 'u1' } as never) : null, complete: false }));
  const reply = await api.create(request({ method: 'post', headers: { ...headers, origin: `https://${HOST}` }, body: form(file) }));
  t.deepEqual(reply.json, { code: 0, message: 'success', data: { id: 'u1' } });
  t.is(reply.headers!['access-control-allow-origin'], `https://${HOST}`, "the app's own origin gets CORS headers");
  const folder = await api.create(request({ method: 'post', headers, body: form({ storage_path: '/docs/sub', file_relative_path: 'undefined', file_type: '', file_size: 'undefined' }) }));
  // Complete at once, with no id: the platform's file manager reads `data.offset` of a folder's answer too.
  t.deepEqual(folder.json, { code: 0, message: 'success', data: { id: '', offset: 0, file_relative_path: '', file_type: '', file_size: 0, storage_path: '/docs/sub' } });
  t.deepEqual(asked, [
    { user: 'alice', app: 'files', storagePath: '/docs', relativePath: 'a.txt', fileType: 'text/plain', fileSize: 12, conflict: 'replace' },
    { user: 'alice', app: 'files', storagePath: '/docs/sub', relativePath: '', fileType: '', fileSize: 0, conflict: 'replace' },
  ]);
});

test("status asks upload.get for the caller's upload; the actor's 404 keeps code 1", async (t) => {
  const { bus, api } = setup(t);
  const asked = responder(bus, upload.get, (req) => {
    if (req.id !== 'u1') throw new PierError('NOT_FOUND', 'no such upload');
    return { id: 'u1', offset: 4 } as never;
  });
  t.deepEqual((await api.status(request({ headers, params: { uid: 'u1' } }))).json, { code: 0, message: 'success', data: { id: 'u1', offset: 4 } });
  t.deepEqual(await api.status(request({ headers, params: { uid: 'u2' } })), { status: 404, json: { code: 1, message: 'no such upload' }, headers: {} });
  t.deepEqual(asked, [{ user: 'alice', app: 'files', id: 'u1' }, { user: 'alice', app: 'files', id: 'u2' }]);
});

test('append: a form without upload_offset, or without the file, is 400 naming it, and opens no write session', async (t) => {
  const { bus, api } = setup(t);
  const asked = responder(bus, upload.begin, () => ({ subject: 'x', offset: 0, maxBytes: 0 }));
  const append = (body: Buffer) => api.append(request({ method: 'patch', headers, params: { uid: 'u1' }, stream: Readable.from([body]) }));
  t.deepEqual((await append(form({ other: '1' }))).json, { code: 1, message: 'upload_offset: is required' });
  t.deepEqual((await append(form({ upload_offset: '0' }))).json, { code: 1, message: 'file: is required' });
  const badOffset = Buffer.from('--XyZ\r\nContent-Disposition: form-data; name="upload_offset"\r\n\r\nabc\r\n--XyZ\r\nContent-Disposition: form-data; name="file"; filename="b"\r\n\r\nbytes\r\n--XyZ--\r\n');
  t.deepEqual((await append(badOffset)).json, { code: 1, message: 'upload_offset: must be a non-negative integer' });
  t.is(asked.length, 0);
});

test("preflight: the app's own origin gets the methods and headers; another origin is 403", (t) => {
  const { api } = setup(t);
  const mine = api.preflight(request({ method: 'options', headers: { host: HOST, origin: `https://${HOST}` } }));
  t.is(mine.status, 204);
  t.is(mine.headers!['access-control-allow-methods'], 'GET, POST, PATCH, OPTIONS');
  t.deepEqual(api.preflight(request({ method: 'options', headers: { host: HOST, origin: 'https://evil.example' } })), { status: 403, json: { code: 1, message: "Origin is not the app's origin" } });
});

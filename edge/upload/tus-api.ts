import { ask } from '../../bus/verbs.js';
import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { asPierError, ErrorReasons, PierError } from '../../bus/errors.js';
import { CONFLICT_POLICIES, upload, type ConflictPolicy, type TusUploadState, type UploadRecord } from '../../bus/subjects.js';
import { identifyBrowserCaller, type BrowserCaller } from '../identity/app-identity.js';
import type { HttpReply, HttpRequestData } from '../http/http.js';
import { TUS_CHECKSUMS, TUS_EXTENSIONS, TUS_VERSION, TusRefusal, byteCount, metaText, parseChecksum, parseMetadata } from './tus-headers.js';
import { cors, drain, type UploadApiDeps } from './upload-api.js';
import { streamToSession } from './upload-stream.js';

/**
 * tus 1.0 on the upload listener (docs/upload.md "tus 1.0 (`/tus/`)"): `/tus/` creates, `/tus/<id>` answers
 * HEAD, PATCH and DELETE. The wire format only: identity, limits, locks, fsync and publication are
 * the upload engine's, shared with section 7's protocol (actors/upload). A PATCH's whole story, from
 * check to publication: `upload-stream.ts`.
 */

const OFFSET_STREAM = 'application/offset+octet-stream';
const CHECKSUM_MISMATCH = 'Upload-Checksum: the chunk does not match its checksum; nothing of it was kept';
const EXPOSED = 'Upload-Offset, Upload-Length, Upload-Defer-Length, Upload-Metadata, Upload-Expires, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Tus-Checksum-Algorithm, Location';
const ALLOWED_HEADERS = 'Tus-Resumable, Upload-Length, Upload-Defer-Length, Upload-Metadata, Upload-Offset, Upload-Checksum, Upload-Concat, Content-Type, X-Authorization, X-HTTP-Method-Override, X-Requested-With';

/** Every tus answer: the protocol version, and CORS for the app's own origin with the tus headers readable. */
function headersFor(req: HttpRequestData, extra: Record<string, string> = {}): Record<string, string> {
  const c = cors(req);
  return { 'tus-resumable': TUS_VERSION, ...(c['access-control-allow-origin'] ? { ...c, 'access-control-expose-headers': EXPOSED } : {}), ...extra };
}

const httpDate = (ms: number) => new Date(ms).toUTCString();

/** The headers that describe an upload's progress (PATCH, POST and HEAD answers). */
function progress(state: { record: UploadRecord; expiresAt: number | null }): Record<string, string> {
  return { 'upload-offset': String(state.record.offset), ...(state.expiresAt !== null ? { 'upload-expires': httpDate(state.expiresAt) } : {}) };
}

/** The engine's fields as tus clients know them: a refusal names the header they sent. */
function tusWords(message: string): string {
  return message
    .replace(/^file_relative_path:/, 'Upload-Metadata filename:')
    .replace(/^file_type:/, 'Upload-Metadata filetype:')
    .replace(/^file_size:/, 'Upload-Length:')
    .replace(/^storage_path:/, 'Upload-Metadata storage_path:')
    .replace(/^file:/, 'body:');
}

function failure(req: HttpRequestData, err: unknown): HttpReply {
  if (err instanceof TusRefusal) return { status: err.status, text: err.message, headers: headersFor(req, err.headers) };
  const e = asPierError(err);
  // Another user's, another app's, the other protocol's, or a finished upload: none is there for tus.
  if (e.is(ErrorReasons.UPLOAD_UNKNOWN)) return { status: 404, text: 'upload not found', headers: headersFor(req) };
  if (e.is(ErrorReasons.OFFSET_MISMATCH)) {
    const current = (e.data as UploadRecord | undefined)?.offset;
    return { status: 409, text: 'Upload-Offset: does not match the upload\'s offset', headers: headersFor(req, current === undefined ? {} : { 'upload-offset': String(current) }) };
  }
  if (e.is(ErrorReasons.CHECKSUM_MISMATCH)) return { status: 460, text: CHECKSUM_MISMATCH, headers: headersFor(req) };
  return { status: e.status, text: tusWords(e.message), headers: headersFor(req) };
}

/** Every request but OPTIONS says which version it speaks (412 with the one served otherwise). */
function checkVersion(req: HttpRequestData): void {
  if (req.headers['tus-resumable'] !== TUS_VERSION) throw new TusRefusal(412, `Tus-Resumable: must be ${TUS_VERSION}`, { 'tus-version': TUS_VERSION });
}

/** The method a client behind a proxy without PATCH or DELETE asked for (tus `X-HTTP-Method-Override`). */
const methodOf = (req: HttpRequestData) => (req.headers['x-http-method-override'] ?? req.method).toUpperCase();

export function tusApi(deps: UploadApiDeps) {
  const who = (req: HttpRequestData): BrowserCaller => identifyBrowserCaller(req.headers, deps.cache, deps.domain, deps.sidecarApp);
  const idOf = (req: HttpRequestData) => ({ id: req.params.id ?? '' });

  /** One PATCH body (or a creation's) into the upload's write session, checksum checked before the bytes count. */
  async function writeBody(req: HttpRequestData, caller: BrowserCaller, id: string, offset: number, stream: Readable) {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== OFFSET_STREAM) throw new TusRefusal(415, `Content-Type: must be ${OFFSET_STREAM}`);
    const checksum = parseChecksum(req.headers['upload-checksum']);
    const length = byteCount(req.headers['upload-length'], 'Upload-Length') ?? null;
    const session = await ask(deps.bus, upload.begin, { user: caller.user, app: caller.app.name, id, offset, protocol: 'tus', length, provisional: checksum !== null });
    let hash: Hash | null = null;
    if (checksum) hash = createHash(checksum.algorithm);
    const confirm = checksum
      ? async () => {
          if (!hash!.digest().equals(checksum.digest)) throw new PierError('BAD_REQUEST', CHECKSUM_MISMATCH, { reason: ErrorReasons.CHECKSUM_MISMATCH });
        }
      : undefined;
    return streamToSession(deps.bus, session, stream, 30_000, confirm, hash ? (c) => hash!.update(c) : undefined);
  }

  const describe = (caller: BrowserCaller, id: string): Promise<TusUploadState> => ask(deps.bus, upload.describe, { user: caller.user, app: caller.app.name, id });

  async function head(req: HttpRequestData): Promise<HttpReply> {
    checkVersion(req);
    const s = await describe(who(req), idOf(req).id);
    const length: Record<string, string> = s.lengthDeferred ? { 'upload-defer-length': '1' } : { 'upload-length': String(s.record.file_size) };
    const metadata: Record<string, string> = s.metadata ? { 'upload-metadata': s.metadata } : {};
    return { status: 200, headers: headersFor(req, { 'cache-control': 'no-store', ...progress(s), ...length, ...metadata }) };
  }

  async function patch(req: HttpRequestData): Promise<HttpReply> {
    checkVersion(req);
    const offset = byteCount(req.headers['upload-offset'], 'Upload-Offset');
    if (offset === undefined) throw new TusRefusal(400, 'Upload-Offset: is required');
    const caller = who(req);
    const id = idOf(req).id;
    const written = await writeBody(req, caller, id, offset, req.stream!);
    const expiresAt = written.complete ? null : Date.now() + deps.idleMs;
    return { status: 204, headers: headersFor(req, progress({ record: written.record, expiresAt })) };
  }

  async function terminate(req: HttpRequestData): Promise<HttpReply> {
    checkVersion(req);
    const caller = who(req);
    await ask(deps.bus, upload.terminate, { user: caller.user, app: caller.app.name, id: idOf(req).id });
    return { status: 204, headers: headersFor(req) };
  }

  async function create(req: HttpRequestData): Promise<HttpReply> {
    checkVersion(req);
    if (req.headers['upload-concat'] !== undefined) throw new TusRefusal(400, 'Upload-Concat: concatenation is not offered (see Tus-Extension)');
    const caller = who(req);
    const options = caller.app.upload;
    if (!options) throw new PierError('BAD_REQUEST', `app "${caller.app.name}" has no upload option in its manifest`);
    const length = byteCount(req.headers['upload-length'], 'Upload-Length');
    const deferred = req.headers['upload-defer-length'];
    if (deferred !== undefined && deferred !== '1') throw new TusRefusal(400, 'Upload-Defer-Length: must be 1');
    if ((length === undefined) === (deferred === undefined)) throw new TusRefusal(400, 'Upload-Length: is required (or Upload-Defer-Length: 1), not both');
    if (length !== undefined && length > options.limitedSize) throw new TusRefusal(413, `Upload-Length: must be at most ${options.limitedSize} bytes (Tus-Max-Size)`);
    const hasBody = Number(req.headers['content-length'] ?? '0') > 0 || req.headers['transfer-encoding'] !== undefined;
    // A first chunk in the wrong format is refused before anything is created.
    if (hasBody && (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() !== OFFSET_STREAM) throw new TusRefusal(415, `Content-Type: a creation with a body must send ${OFFSET_STREAM}`);
    const metadataHeader = req.headers['upload-metadata'];
    const meta = parseMetadata(metadataHeader);
    const relativePath = metaText(meta, 'relativePath', 'filename', 'name');
    if (relativePath === undefined) throw new TusRefusal(400, 'Upload-Metadata filename: is required (filename, name or relativePath)');
    const conflict = (metaText(meta, 'conflict') ?? 'replace') as ConflictPolicy;
    if (!CONFLICT_POLICIES.includes(conflict)) throw new TusRefusal(400, `Upload-Metadata conflict: must be one of ${CONFLICT_POLICIES.join(', ')}`);
    const created = await ask(deps.bus, upload.create, {
      user: caller.user,
      app: caller.app.name,
      storagePath: metaText(meta, 'storage_path') ?? options.dest,
      relativePath,
      fileType: metaText(meta, 'filetype', 'type') ?? '',
      fileSize: length ?? 0,
      conflict,
      protocol: 'tus',
      lengthDeferred: deferred === '1',
      metadata: metadataHeader ?? '',
    });
    const id = created.record!.id;
    const location = { location: `/tus/${id}` };
    if (!hasBody || created.complete) return { status: 201, headers: headersFor(req, { ...location, ...progress(created.tus!) }) };
    // creation-with-upload: the body is the first chunk. The upload exists whatever becomes of it:
    // a refused or broken body still answers where it is, so the client can resume there.
    try {
      const written = await writeBody(req, caller, id, 0, req.stream!);
      return { status: 201, headers: headersFor(req, { ...location, ...progress({ record: written.record, expiresAt: written.complete ? null : Date.now() + deps.idleMs }) }) };
    } catch (err) {
      const reply = failure(req, err);
      return { ...reply, headers: { ...reply.headers, ...location } };
    }
  }

  /** OPTIONS: a CORS preflight (the app's origin only) or tus discovery. */
  function options(req: HttpRequestData): HttpReply {
    if (req.headers['access-control-request-method'] !== undefined) {
      const c = cors(req);
      if (!c['access-control-allow-origin']) return { status: 403, text: "Origin is not the app's origin" };
      return {
        status: 204,
        headers: { ...c, 'access-control-allow-methods': 'POST, HEAD, PATCH, DELETE, OPTIONS', 'access-control-allow-headers': ALLOWED_HEADERS, 'access-control-max-age': '600' },
      };
    }
    let maxSize: Record<string, string> = {};
    try {
      const limit = who(req).app.upload?.limitedSize;
      if (limit !== undefined) maxSize = { 'tus-max-size': String(limit) };
    } catch {
      // Discovery without credentials: everything but the app's own limit.
    }
    return {
      status: 204,
      headers: headersFor(req, { 'tus-version': TUS_VERSION, 'tus-extension': TUS_EXTENSIONS, 'tus-checksum-algorithm': TUS_CHECKSUMS.join(','), ...maxSize }),
    };
  }

  /** Runs one verb; a refusal is answered after the rest of the body is read (bounded), never with a reset. */
  const answer = (verb: (req: HttpRequestData) => Promise<HttpReply>) => async (req: HttpRequestData): Promise<HttpReply> => {
    try {
      return await verb(req);
    } catch (err) {
      if (req.stream) await drain(req.stream, 4 * deps.chunkBytes);
      return failure(req, err);
    }
  };

  const byMethod: Record<string, (req: HttpRequestData) => Promise<HttpReply>> = { HEAD: head, PATCH: patch, DELETE: terminate };
  return {
    options,
    create: answer(create),
    head: answer(head),
    patch: answer(patch),
    terminate: answer(terminate),
    /** `POST /tus/<id>` with `X-HTTP-Method-Override: PATCH | DELETE | HEAD`. */
    override: answer(async (req) => {
      const verb = byMethod[methodOf(req)];
      if (!verb) throw new TusRefusal(405, 'X-HTTP-Method-Override: must be PATCH, DELETE or HEAD', { allow: 'HEAD, PATCH, DELETE, OPTIONS' });
      return verb(req);
    }),
  };
}

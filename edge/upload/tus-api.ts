import { ask } from '../../bus/verbs.js';
import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { asPierError, ErrorReasons, PierError } from '../../bus/errors.js';
import { CONFLICT_POLICIES, upload, type ConflictPolicy, type TusUploadState, type UploadRecord } from '../../bus/subjects.js';
import { identifyBrowserCaller, type BrowserCaller } from '../identity/app-identity.js';
import type { HttpReply, HttpRequestData } from '../http/http.js';
import { TUS_CHECKSUMS, TUS_EXTENSIONS, TUS_VERSION, byteCount, metaText, parseChecksum, parseMetadata } from './tus-headers.js';
import { TUS_ERRORS, TusRefusal, tusRefusal, tusRefusalOf, tusRefusalWith } from './tus-errors.js';
import { cors, drain, type UploadApiDeps } from './upload-api.js';
import { streamToSession } from './upload-stream.js';

/**
 * tus 1.0 on the upload listener (docs/upload.md "tus 1.0 (`/tus/`)"): `/tus/` creates, `/tus/<id>` answers
 * HEAD, PATCH and DELETE. The wire format only: identity, limits, locks, fsync and publication are
 * the upload engine's, shared with section 7's protocol (actors/upload). A PATCH's whole story, from
 * check to publication: `upload-stream.ts`.
 */

const OFFSET_STREAM = 'application/offset+octet-stream';
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
  // The tus layer's own refusals, and the engine's by reason (tus-errors.ts); any other with its fields named as tus names them.
  const refusal = err instanceof TusRefusal ? err : tusRefusalOf(asPierError(err));
  if (refusal) return { status: refusal.status, text: refusal.message, headers: headersFor(req, refusal.headers) };
  const e = asPierError(err);
  return { status: e.status, text: tusWords(e.message), headers: headersFor(req) };
}

/** Every request but OPTIONS says which version it speaks (412 with the one served otherwise). */
function checkVersion(req: HttpRequestData): void {
  if (req.headers['tus-resumable'] !== TUS_VERSION) throw tusRefusalWith({ 'tus-version': TUS_VERSION }, 'VERSION', TUS_VERSION);
}

/** The method a client behind a proxy without PATCH or DELETE asked for (tus `X-HTTP-Method-Override`). */
const methodOf = (req: HttpRequestData) => (req.headers['x-http-method-override'] ?? req.method).toUpperCase();

export function tusApi(deps: UploadApiDeps) {
  const who = (req: HttpRequestData): BrowserCaller => identifyBrowserCaller(req.headers, deps.cache, deps.domain, deps.sidecarApp);
  const idOf = (req: HttpRequestData) => ({ id: req.params.id ?? '' });
  /**
   * A body chunk comes back to the pool it was copied into once the write session has written it
   * (edge/http/block-pool.ts). A body read any other way (drained after a refusal) keeps its blocks
   * until the collector.
   */
  const release = (chunk: Uint8Array) => deps.bodyPool?.release(chunk);

  /** One PATCH body (or a creation's) into the upload's write session, checksum checked before the bytes count. */
  async function writeBody(req: HttpRequestData, caller: BrowserCaller, id: string, offset: number, stream: Readable) {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== OFFSET_STREAM) throw tusRefusal('CONTENT_TYPE', OFFSET_STREAM);
    const checksum = parseChecksum(req.headers['upload-checksum']);
    const length = byteCount(req.headers['upload-length'], 'Upload-Length') ?? null;
    const session = await ask(deps.bus, upload.begin, { user: caller.user, app: caller.app.name, id, offset, protocol: 'tus', length, provisional: checksum !== null });
    let hash: Hash | null = null;
    if (checksum) hash = createHash(checksum.algorithm);
    const confirm = checksum
      ? async () => {
          if (!hash!.digest().equals(checksum.digest)) throw new PierError('BAD_REQUEST', TUS_ERRORS.CHECKSUM_MISMATCH.text(), { reason: ErrorReasons.CHECKSUM_MISMATCH });
        }
      : undefined;
    return streamToSession(deps.bus, session, stream, 30_000, confirm, hash ? (c) => hash!.update(c) : undefined, release);
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
    if (offset === undefined) throw tusRefusal('OFFSET_REQUIRED');
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
    if (req.headers['upload-concat'] !== undefined) throw tusRefusal('CONCAT');
    const caller = who(req);
    const options = caller.app.upload;
    if (!options) throw new PierError('BAD_REQUEST', `app "${caller.app.name}" has no upload option in its manifest`);
    const length = byteCount(req.headers['upload-length'], 'Upload-Length');
    const deferred = req.headers['upload-defer-length'];
    if (deferred !== undefined && deferred !== '1') throw tusRefusal('DEFER_LENGTH');
    if ((length === undefined) === (deferred === undefined)) throw tusRefusal('LENGTH_REQUIRED');
    if (length !== undefined && length > options.limitedSize) throw tusRefusal('MAX_SIZE', options.limitedSize);
    const hasBody = Number(req.headers['content-length'] ?? '0') > 0 || req.headers['transfer-encoding'] !== undefined;
    // A first chunk in the wrong format is refused before anything is created.
    if (hasBody && (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase() !== OFFSET_STREAM) throw tusRefusal('CREATION_CONTENT_TYPE', OFFSET_STREAM);
    const metadataHeader = req.headers['upload-metadata'];
    const meta = parseMetadata(metadataHeader);
    const relativePath = metaText(meta, 'relativePath', 'filename', 'name');
    if (relativePath === undefined) throw tusRefusal('FILENAME_REQUIRED');
    const conflict = (metaText(meta, 'conflict') ?? 'replace') as ConflictPolicy;
    if (!CONFLICT_POLICIES.includes(conflict)) throw tusRefusal('CONFLICT_POLICY', CONFLICT_POLICIES);
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
      if (!c['access-control-allow-origin']) return { status: TUS_ERRORS.ORIGIN.status, text: TUS_ERRORS.ORIGIN.text() };
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
      if (!verb) throw tusRefusalWith({ allow: 'HEAD, PATCH, DELETE, OPTIONS' }, 'METHOD_OVERRIDE');
      return verb(req);
    }),
  };
}

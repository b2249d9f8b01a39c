import { UploadTexts } from '../../bus/upload-texts.js';
import { ask } from '../../bus/verbs.js';
import { Readable } from 'node:stream';
import busboy from 'busboy';
import type { Bus } from '../../bus/bus.js';
import { asPierError, ErrorReasons, PierError } from '../../bus/errors.js';
import { CONFLICT_POLICIES, upload, type ConflictPolicy, type WriteSession } from '../../bus/subjects.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { identifyBrowserCaller } from '../identity/app-identity.js';
import { originAllowed } from '../identity/host.js';
import type { HttpReply, HttpRequestData } from '../http/http.js';
import { streamToSession } from './upload-stream.js';
import { lendThroughBusboy } from './multipart-views.js';
import type { BlockPool } from '../http/block-pool.js';

export interface UploadApiDeps {
  bus: Bus;
  cache: RegistryCache;
  domain: string;
  sidecarApp: { user: string; app: string } | null;
  chunkBytes: number;
  /** How long an unfinished upload may stay idle (tus `Upload-Expires`). */
  idleMs: number;
  /** The pool the upload routes' bodies are copied into (edge/http/block-pool.ts); chunks go back to it once written. */
  bodyPool?: BlockPool;
}

/** The app's own origin may call the upload API from a browser; any other origin gets no CORS headers. */
export function cors(req: HttpRequestData): Record<string, string> {
  const origin = req.headers.origin;
  if (!origin || !originAllowed(origin, req.headers.host ?? '')) return {};
  return { 'access-control-allow-origin': origin, 'access-control-allow-credentials': 'true', vary: 'Origin' };
}

/** Upload errors keep the spec's body: `code: 1` (docs/protocol.md "Conventions"), the HTTP status says the class. */
function failure(req: HttpRequestData, err: unknown): HttpReply {
  const e = asPierError(err);
  const json: Record<string, unknown> = { code: 1, message: e.message };
  if (e.data !== undefined && e.is(ErrorReasons.OFFSET_MISMATCH)) json.data = e.data;
  return { status: e.status, json, headers: cors(req) };
}

const bad = (message: string) => new PierError('BAD_REQUEST', message);

/** Small multipart (or urlencoded) bodies: the fields only. A file part in them is refused. */
function parseFields(req: HttpRequestData): Promise<Record<string, string>> {
  const type = req.headers['content-type'] ?? '';
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: { 'content-type': type }, limits: { fields: 16, fieldSize: 8192, files: 1 } });
    } catch {
      reject(bad('body: must be multipart/form-data'));
      return;
    }
    const fields: Record<string, string> = {};
    bb.on('field', (name, value) => {
      fields[name] = value;
    });
    bb.on('file', (name, file) => {
      file.resume();
      reject(bad(`${name}: a POST carries no file; send the bytes with PATCH /upload/{id}`));
    });
    bb.on('error', () => reject(bad('body: is not valid multipart/form-data')));
    bb.on('close', () => resolve(fields));
    Readable.from([req.body]).pipe(bb);
  });
}

function required(fields: Record<string, string>, name: string): string {
  const v = fields[name];
  if (v === undefined || v === '') throw bad(`${name}: is required`);
  return v;
}

function present(fields: Record<string, string>, name: string): string {
  const v = fields[name];
  if (v === undefined) throw bad(`${name}: is required`);
  return v;
}

/** A field the platform's client leaves out: absent, empty, or JavaScript's `undefined` sent as text. */
const blank = (fields: Record<string, string>, name: string) => fields[name] === undefined || fields[name] === '' || fields[name] === 'undefined';

/**
 * The platform's file manager's folder entry (docs/protocol.md "Upload"): for each folder of a folder
 * upload it POSTs `storage_path` = the folder to create and no file: `file_relative_path`,
 * `file_type` and `file_size` absent, empty or the text `undefined`.
 */
function isFolderEntry(fields: Record<string, string>): boolean {
  return blank(fields, 'file_relative_path') && blank(fields, 'file_size') && blank(fields, 'file_type');
}

function nonNegativeInteger(text: string, name: string): number {
  if (!/^\d{1,16}$/.test(text.trim()) || !Number.isSafeInteger(Number(text))) throw bad(`${name}: must be a non-negative integer`);
  return Number(text);
}

/** The upload listener (port 40030): POST creates, PATCH appends, GET tells the offset. */
export function uploadApi(deps: UploadApiDeps) {
  const who = (req: HttpRequestData) => identifyBrowserCaller(req.headers, deps.cache, deps.domain, deps.sidecarApp);

  return {
    preflight(req: HttpRequestData): HttpReply {
      const headers = cors(req);
      if (!headers['access-control-allow-origin']) return { status: 403, json: { code: 1, message: "Origin is not the app's origin" } };
      return {
        status: 204,
        headers: { ...headers, 'access-control-allow-methods': 'GET, POST, PATCH, OPTIONS', 'access-control-allow-headers': 'content-type, x-authorization', 'access-control-max-age': '600' },
      };
    },

    async create(req: HttpRequestData): Promise<HttpReply> {
      try {
        const { user, app } = who(req);
        const fields = await parseFields(req);
        const conflict = (fields.conflict ?? 'replace') as ConflictPolicy;
        if (!CONFLICT_POLICIES.includes(conflict)) throw bad(`conflict: must be one of ${CONFLICT_POLICIES.join(', ')}`);
        const storagePath = required(fields, 'storage_path');
        const folderEntry = isFolderEntry(fields);
        const created = await ask(deps.bus, upload.create, folderEntry
            ? // The folder to create is storage_path itself (the actor knows it by the empty path).
              { user, app: app.name, storagePath, relativePath: '', fileType: '', fileSize: 0, conflict }
            : {
                user,
                app: app.name,
                storagePath,
                relativePath: required(fields, 'file_relative_path'),
                // Present, but may be empty: the platform's client sends "" for files without a type.
                fileType: present(fields, 'file_type'),
                fileSize: nonNegativeInteger(required(fields, 'file_size'), 'file_size'),
                conflict,
              });
        // A folder has no upload, but the platform's file manager reads `data.offset` of every answer
        // (docs/protocol.md "Upload"): a folder answers a record that is already complete, with no id.
        const record = created.record ?? { id: '', offset: 0, file_relative_path: folderEntry ? '' : (fields.file_relative_path ?? ''), file_type: '', file_size: 0, storage_path: storagePath };
        const json = { code: 0, message: 'success', data: record };
        return { status: 200, json, headers: cors(req) };
      } catch (err) {
        return failure(req, err);
      }
    },

    async status(req: HttpRequestData): Promise<HttpReply> {
      try {
        const { user, app } = who(req);
        const record = await ask(deps.bus, upload.get, { user, app: app.name, id: req.params.uid });
        return { status: 200, json: { code: 0, message: 'success', data: record }, headers: cors(req) };
      } catch (err) {
        return failure(req, err);
      }
    },

    async append(req: HttpRequestData): Promise<HttpReply> {
      const stream = req.stream!;
      try {
        const { user, app } = who(req);
        const result = await appendChunk(deps, { user, app: app.name, id: req.params.uid }, req.headers['content-type'] ?? '', stream);
        return { status: 200, json: { code: 0, message: result.complete ? UploadTexts.UPLOADED : UploadTexts.CONTINUE, data: result.record }, headers: cors(req) };
      } catch (err) {
        await drain(stream, 4 * deps.chunkBytes);
        return failure(req, err);
      }
    },
  };
}

function parseOffset(value: string | undefined): number {
  if (value === undefined) throw bad('upload_offset: is required');
  if (!/^\d{1,16}$/.test(value.trim()) || !Number.isSafeInteger(Number(value))) throw bad('upload_offset: must be a non-negative integer');
  return Number(value);
}

/**
 * One PATCH's multipart form, `upload_offset` and `file` in either order, streamed to the upload
 * actor. With the offset first, the actor checks it before a byte is written. With the file first
 * (the platform's own client), the chunk is written at the current offset, unconfirmed, and kept
 * only if the `upload_offset` that follows it is that offset; otherwise it is cut back and the
 * answer is "Invalid offset" with the current record, as if the offset had come first.
 */
function appendChunk(deps: UploadApiDeps, target: { user: string; app: string; id: string }, contentType: string, stream: Readable): Promise<{ record: unknown; complete: boolean }> {
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      // One byte over the cap lets the actor tell "too much" from "exactly the cap".
      bb = busboy({ headers: { 'content-type': contentType }, highWaterMark: 256 * 1024, fileHwm: 256 * 1024, limits: { files: 1, fields: 8, fieldSize: 64, fileSize: deps.chunkBytes + 1 } });
    } catch {
      reject(bad('body: must be multipart/form-data'));
      return;
    }
    const pool = deps.bodyPool;
    if (pool) lendThroughBusboy(bb, pool);
    let offsetField: string | undefined;
    let taken = false;
    // Settles once the whole form is parsed: every field after the file is known then.
    const parsed = new Promise<void>((done, fail) => {
      bb.on('close', done);
      bb.on('error', fail);
    });
    parsed.catch(() => undefined); // observed through `reject` below as well
    bb.on('field', (name, value) => {
      if (name === 'upload_offset') offsetField = value;
    });
    bb.on('file', (name, file) => {
      // A client that goes away makes the part emit 'error', maybe before anything reads it (while
      // the write session is being opened): unobserved, that error would take the process down.
      // The failure reaches the answer through busboy's own 'error' and the reader of the part.
      file.on('error', () => undefined);
      if (name !== 'file' || taken) {
        file.resume();
        return;
      }
      taken = true;
      let offset: number | null = null;
      if (offsetField !== undefined) {
        try {
          offset = parseOffset(offsetField);
        } catch (err) {
          file.resume();
          reject(err);
          return;
        }
      }
      // With the file first, the offset is checked once the form has ended, before the bytes count.
      const confirm = offset !== null ? undefined : async () => {
        await parsed;
        const sent = parseOffset(offsetField);
        if (sent !== session!.offset) throw new PierError('BAD_REQUEST', UploadTexts.INVALID_OFFSET, { reason: ErrorReasons.OFFSET_MISMATCH });
      };
      let session: WriteSession | undefined;
      ask(deps.bus, upload.begin, { ...target, offset })
        .then((s) => streamToSession(deps.bus, (session = s), file, 30_000, confirm, undefined, pool && ((chunk) => pool.release(chunk))))
        .then(resolve, (err) => {
          file.resume();
          reject(err);
        });
    });
    bb.on('close', () => {
      if (!taken) reject(offsetField === undefined ? bad('upload_offset: is required') : bad('file: is required'));
    });
    // A client gone is the stream's own error (uws-request.ts destroys it so); a body that simply
    // ended mid-form also reads as destroyed (autoDestroy), and is the parser's complaint.
    bb.on('error', (err) => reject(stream.errored ? new PierError('BAD_REQUEST', 'request aborted') : bad(`body: is not valid multipart/form-data (${(err as Error).message})`)));
    stream.on('error', (err) => bb.destroy(err));
    stream.pipe(bb);
  });
}

/**
 * Reads what is left of a refused request's body before answering: a client still sending gets
 * the answer (409, 400…) instead of a reset connection. Bounded in bytes and time.
 */
export function drain(stream: Readable, maxBytes: number): Promise<void> {
  return new Promise((resolve) => {
    if (stream.readableEnded || stream.destroyed) return resolve();
    let seen = 0;
    const timer = setTimeout(done, 10_000);
    function done() {
      clearTimeout(timer);
      stream.removeAllListeners('data');
      resolve();
    }
    stream.unpipe();
    stream.on('data', (chunk: Buffer) => {
      seen += chunk.byteLength;
      if (seen > maxBytes) done();
    });
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
    stream.resume();
  });
}

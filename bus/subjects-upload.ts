import { exchange } from './exchange.js';
import { pieces } from './subjects-stream.js';
import { USER_NAME } from './subjects-registry.js';

/** The record the upload endpoints answer with (spec "Upload record"). */
export interface UploadRecord {
  id: string;
  offset: number;
  file_relative_path: string;
  file_type: string;
  file_size: number;
  storage_path: string;
}

export const CONFLICT_POLICIES = ['replace', 'rename', 'fail'] as const;
export type ConflictPolicy = (typeof CONFLICT_POLICIES)[number];

export interface CreateUpload {
  user: string;
  app: string;
  storagePath: string;
  relativePath: string;
  fileType: string;
  fileSize: number;
  conflict: ConflictPolicy;
  /**
   * `tus`: created through `/tus/` (docs/upload.md "tus 1.0 (`/tus/`)"). A tus upload is continued with tus
   * only, is never found by its target (every tus POST creates an upload of its own, as tus
   * clients expect), and may carry the rest of its length in one PATCH. Absent: section 7's protocol.
   */
  protocol?: 'tus';
  /** tus `creation-defer-length`: `fileSize` is the manifest's cap until a PATCH declares the length. */
  lengthDeferred?: boolean;
  /** tus `Upload-Metadata` as the client sent it, echoed by HEAD. */
  metadata?: string;
}

/** `record` is null when a folder was created. `complete` for a 0-byte file. */
export interface Created {
  record: UploadRecord | null;
  complete: boolean;
  /** A tus creation: the upload as HEAD would tell it. */
  tus?: TusUploadState;
}

export interface BeginWrite {
  user: string;
  app: string;
  id: string;
  /**
   * The client's `upload_offset`, checked before anything is written; null when the form sends
   * `file` before `upload_offset` (the platform's own client does): the chunk is then written at
   * the current offset, unconfirmed, and kept only if the edge ends the session with `end` once the
   * offset turned out right (`discard` otherwise; an `abort` or silence discards it too).
   */
  offset: number | null;
  /** The protocol the upload was created with: a PATCH of the other one finds no such upload. */
  protocol?: 'tus';
  /** tus `Upload-Length` sent on a PATCH of a deferred-length upload: declares it, once. */
  length?: number | null;
  /**
   * The bytes count only if the session ends with `end` (tus `Upload-Checksum`: the edge checks the
   * digest after the last byte and says `discard` on a mismatch); an abort keeps nothing.
   */
  provisional?: boolean;
}

/** An unfinished upload as the operator sees it: where, how far, since when (never its bytes). */
export interface UploadInProgress {
  id: string;
  user: string;
  app: string;
  /** The target in the app's view. */
  path: string;
  offset: number;
  /** null while a tus upload's length is deferred. */
  size: number | null;
  protocol: 'tus' | 'upload';
  writing: boolean;
  updatedAt: number;
}

/** A tus upload as HEAD tells it (docs/upload.md "tus 1.0 (`/tus/`)"). */
export interface TusUploadState {
  record: UploadRecord;
  lengthDeferred: boolean;
  metadata: string;
  /** When the idle rule removes it (ms since the epoch); null once complete. */
  expiresAt: number | null;
  complete: boolean;
}

/**
 * A write session: pieces go to `subject` in order; `offset` is where this PATCH's bytes start;
 * `maxBytes` is what it may still carry.
 */
export interface WriteSession {
  subject: string;
  offset: number;
  maxBytes: number;
}

/** What a write session answers a piece with: on `end`, `abort` and `discard`, the record after the write, fsynced. */
export interface PieceAnswer {
  record?: UploadRecord;
  complete?: boolean;
}

export interface UploadCompleted {
  user: string;
  app: string;
  path: string;
  size: number;
}

/** The longest `Upload-Metadata` header a tus creation may carry (bytes). */
export const TUS_METADATA_MAX = 4096;

/** `upload.dest` and `storage_path` in the app's view: absolute, no `..` segment, no NUL, no backslash. */
export const APP_VIEW_PATH = /^(?!.*(?:^|\/)\.\.(?:\/|$))\/[^\0\\]*$/;

const userApp = { user: { type: 'string', min: 1, max: 64 }, app: { type: 'string', min: 1, max: 64 } } as const;
const Q = 'upload';

export const upload = {
  create: exchange<CreateUpload, Created>({ subject: 'pier.upload.create', queue: Q, request: {
    ...userApp,
    storagePath: { type: 'string', max: 4096 },
    relativePath: { type: 'string', max: 4096 },
    fileType: { type: 'string', max: 64 },
    fileSize: { type: 'number', integer: true, min: 0 },
    conflict: { type: 'enum', values: [...CONFLICT_POLICIES] },
    protocol: { type: 'enum', values: ['tus'], optional: true },
    lengthDeferred: { type: 'boolean', optional: true },
    metadata: { type: 'string', max: TUS_METADATA_MAX, optional: true },
  }, timeoutMs: 30_000 }),
  get: exchange<{ user: string; app: string; id: string }, UploadRecord>({ subject: 'pier.upload.get', queue: Q, request: { ...userApp, id: { type: 'string', max: 64 } } }),
  /** Locks the upload for one PATCH (409 `upload busy` when another holds it). */
  begin: exchange<BeginWrite, WriteSession>({ subject: 'pier.upload.begin', queue: Q, request: {
    ...userApp,
    id: { type: 'string', max: 64 },
    offset: { type: 'number', integer: true, min: 0, nullable: true },
    protocol: { type: 'enum', values: ['tus'], optional: true },
    length: { type: 'number', integer: true, min: 0, nullable: true, optional: true },
    provisional: { type: 'boolean', optional: true },
  } }),
  /** tus HEAD: a tus upload's offset, length, metadata and expiry (404-like `Invalid upload ID` for any other). */
  describe: exchange<{ user: string; app: string; id: string }, TusUploadState>({ subject: 'pier.upload.describe', queue: Q, request: { ...userApp, id: { type: 'string', max: 64 } } }),
  /** The operator's view (console, `pier upload list`): unfinished uploads of this replica's storage, newest first. */
  list: exchange<{ limit: number }, { uploads: UploadInProgress[]; truncated: boolean }>({ subject: 'pier.upload.list', queue: Q, request: { limit: { type: 'number', integer: true, min: 1, max: 1000 } } }),
  /** tus DELETE: an unfinished tus upload and its partial data go (once no PATCH holds it). */
  terminate: exchange<{ user: string; app: string; id: string }, { terminated: boolean }>({ subject: 'pier.upload.terminate', queue: Q, request: { ...userApp, id: { type: 'string', max: 64 } } }),
  /** At install: creates the user's folder for the app's `dest` and answers its host path (the install's `uploadDir`). */
  prepare: exchange<{ user: string; dest: string }, { dir: string }>({ subject: 'pier.upload.prepare', queue: Q, request: {
    user: { type: 'string', pattern: USER_NAME },
    dest: { type: 'string', max: 4096, pattern: APP_VIEW_PATH },
  } }),
};

/**
 * A PATCH's bytes, pushed to its write session (bus/byte-stream.ts), which answers each piece once
 * its write is issued, and the end once written, fsynced and recorded. The deadline of one piece is
 * the edge's own (PIER_UPLOAD_IDLE_MS, at least the time a write may take).
 */
export const uploadStream = pieces<PieceAnswer>({ record: { type: 'object', optional: true }, complete: { type: 'boolean', optional: true } }, 30_000);

/** A PATCH's write session: the edge sends its pieces here, to the upload replica holding the lock. */
export const uploadSubjects = {
  session: (uploadBusId: string, session: string) => `pier.upload.session.${uploadBusId}.${session}`,
};

export const uploadEvents = {
  completed: exchange<UploadCompleted>({ subject: 'pier.upload.completed', request: {
    user: { type: 'string', max: 64 },
    app: { type: 'string', max: 64 },
    path: { type: 'string', max: 8192 },
    size: { type: 'number', integer: true, min: 0 },
  }, oneWay: true }),
  /**
   * A write session of one upload replica ended (its lock released): the other replicas wake what
   * waits on that upload (actors/upload/lock.ts). It only prompts a fresh read of the record.
   */
  released: exchange<{ id: string }>({ subject: 'pier.upload.released', request: { id: { type: 'string', max: 64 } }, oneWay: true }),
};

/** Upload records on JetStream (PIER_STATE=jetstream): one replicated log for every upload replica, compacted by snapshots. */
export const uploadState = {
  stream: 'PIER_UPLOADS',
  subject: 'pier.state.uploads',
  snapshotStream: 'PIER_UPLOADS_SNAPSHOTS',
  snapshotPrefix: 'pier.state.snapshots.uploads',
} as const;

/**
 * A completed upload, for the app that declared `upload.callback` (docs/protocol.md "Upload"; issue
 * "operator experience"). The upload role asks a callback replica (queue group `callback`) to deliver
 * it: signed with the app secret like gateway callbacks, retried until the app answers 2xx.
 */
export interface UploadNotice {
  /** `upload:<upload id>`: the callback's `X-Pier-Event-Id`, the same on every retry. */
  eventId: string;
  user: string;
  app: string;
  /** The file in the app's view. */
  path: string;
  size: number;
}

export const uploadNotices = {
  deliver: exchange<UploadNotice, { accepted: boolean }>({ subject: 'pier.cb.upload', queue: 'callback', request: {
    eventId: { type: 'string', max: 128, pattern: /^upload:[A-Za-z0-9_-]{1,64}$/ },
    user: { type: 'string', pattern: USER_NAME },
    app: { type: 'string', max: 64 },
    path: { type: 'string', max: 8192 },
    size: { type: 'number', integer: true, min: 0 },
  } }),
};

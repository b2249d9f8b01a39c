import { ErrorReasons, type ErrorReason, type PierError } from '../../bus/errors.js';

/**
 * Every refusal tus clients get from Pier (docs/upload.md "tus 1.0 (`/tus/`)"), by name: its status
 * and its text, as tus-node-server keeps its `ERRORS` in `constants.ts`. The tus layer throws them by
 * name; the upload engine's refusals arrive with a reason (bus/errors.ts `ErrorReasons`) and the
 * figure they need in `data`, and are put in tus words here (`tusRefusalOf`). Each text names the
 * header the client sent; tus clients and the e2e tests read them as they are.
 */
export const TUS_ERRORS = {
  /** Every request but OPTIONS says which version it speaks. */
  VERSION: { status: 412, text: (version: string) => `Tus-Resumable: must be ${version}` },
  CONTENT_TYPE: { status: 415, text: (type: string) => `Content-Type: must be ${type}` },
  /** A first chunk in the wrong format is refused before anything is created. */
  CREATION_CONTENT_TYPE: { status: 415, text: (type: string) => `Content-Type: a creation with a body must send ${type}` },
  OFFSET_REQUIRED: { status: 400, text: () => 'Upload-Offset: is required' },
  NOT_A_COUNT: { status: 400, text: (header: string) => `${header}: must be a non-negative integer` },
  CONCAT: { status: 400, text: () => 'Upload-Concat: concatenation is not offered (see Tus-Extension)' },
  DEFER_LENGTH: { status: 400, text: () => 'Upload-Defer-Length: must be 1' },
  LENGTH_REQUIRED: { status: 400, text: () => 'Upload-Length: is required (or Upload-Defer-Length: 1), not both' },
  MAX_SIZE: { status: 413, text: (bytes: number) => `Upload-Length: must be at most ${bytes} bytes (Tus-Max-Size)` },
  FILENAME_REQUIRED: { status: 400, text: () => 'Upload-Metadata filename: is required (filename, name or relativePath)' },
  CONFLICT_POLICY: { status: 400, text: (policies: readonly string[]) => `Upload-Metadata conflict: must be one of ${policies.join(', ')}` },
  METADATA_TOO_LONG: { status: 400, text: (bytes: number) => `Upload-Metadata: must be at most ${bytes} bytes` },
  METADATA_TOO_MANY: { status: 400, text: (keys: number) => `Upload-Metadata: at most ${keys} keys` },
  METADATA_ENTRY: { status: 400, text: () => 'Upload-Metadata: each entry is a key (letters, digits, "_.~-") and an optional base64 value' },
  METADATA_TWICE: { status: 400, text: (key: string) => `Upload-Metadata: key "${key}" appears twice` },
  METADATA_NOT_BASE64: { status: 400, text: (key: string) => `Upload-Metadata: the value of "${key}" is not base64` },
  METADATA_NOT_TEXT: { status: 400, text: (key: string) => `Upload-Metadata: the value of "${key}" is not UTF-8 text` },
  CHECKSUM_ALGORITHM: { status: 400, text: (algorithms: readonly string[]) => `Upload-Checksum: the algorithm must be one of ${algorithms.join(', ')}` },
  CHECKSUM_FORM: { status: 400, text: (algorithm: string, bytes: number) => `Upload-Checksum: must be "${algorithm} <base64 of the ${bytes}-byte digest>"` },
  /** tus's checksum extension: 460 Checksum Mismatch. */
  CHECKSUM_MISMATCH: { status: 460, text: () => 'Upload-Checksum: the chunk does not match its checksum; nothing of it was kept' },
  METHOD_OVERRIDE: { status: 405, text: () => 'X-HTTP-Method-Override: must be PATCH, DELETE or HEAD' },
  /** A CORS preflight from another origin than the app's. */
  ORIGIN: { status: 403, text: () => "Origin is not the app's origin" },
  /** Another user's, another app's, the other protocol's, or a finished upload: none is there for tus. */
  NOT_FOUND: { status: 404, text: () => 'upload not found' },
  OFFSET_MISMATCH: { status: 409, text: () => "Upload-Offset: does not match the upload's offset" },
  NOT_A_FILE: { status: 400, text: () => 'Upload-Metadata filename: must name a file, not a folder' },
  PAST_LENGTH: { status: 400, text: (bytes: number) => `Upload-Length: the chunk goes past the upload's length (${bytes} bytes)` },
  PAST_MAX_SIZE: { status: 400, text: (bytes: number) => `Upload-Length: the upload would pass the largest size allowed (${bytes} bytes)` },
  LENGTH_FIXED: { status: 400, text: (bytes: number) => `Upload-Length: the upload's length is ${bytes} and cannot change` },
  LENGTH_BELOW_OFFSET: { status: 400, text: (bytes: number) => `Upload-Length: ${bytes} bytes are already written` },
  LENGTH_OVER_MAX: { status: 400, text: (bytes: number) => `Upload-Length: must be at most ${bytes} bytes` },
} as const;

export type TusErrorName = keyof typeof TUS_ERRORS;
type TextArgs<N extends TusErrorName> = Parameters<(typeof TUS_ERRORS)[N]['text']>;

/** A request the tus layer refuses: its own status (412, 413, 415, 460…), its text, and headers to answer with it. */
export class TusRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** The refusal `name`, its text filled in with `args`. */
export function tusRefusal<N extends TusErrorName>(name: N, ...args: TextArgs<N>): TusRefusal {
  const entry = TUS_ERRORS[name];
  return new TusRefusal(entry.status, (entry.text as (...a: TextArgs<N>) => string)(...args));
}

/** The same, answered with headers (the version served, the methods allowed, the upload's offset). */
export function tusRefusalWith<N extends TusErrorName>(headers: Record<string, string>, name: N, ...args: TextArgs<N>): TusRefusal {
  const refusal = tusRefusal(name, ...args);
  return new TusRefusal(refusal.status, refusal.message, headers);
}

/** The figure an engine refusal carries for its text (`data.bytes`). */
const bytesOf = (e: PierError): number | undefined => {
  const bytes = (e.data as { bytes?: unknown } | undefined)?.bytes;
  return typeof bytes === 'number' ? bytes : undefined;
};

/** The engine's reasons in tus words: a reason, or its figure, missing (an older engine's refusal) maps to nothing here. */
const BY_REASON: Partial<Record<ErrorReason, (e: PierError) => TusRefusal | undefined>> = {
  [ErrorReasons.UPLOAD_UNKNOWN]: () => tusRefusal('NOT_FOUND'),
  [ErrorReasons.OFFSET_MISMATCH]: (e) => {
    const current = (e.data as { offset?: number } | undefined)?.offset;
    return tusRefusalWith(current === undefined ? {} : { 'upload-offset': String(current) }, 'OFFSET_MISMATCH');
  },
  [ErrorReasons.CHECKSUM_MISMATCH]: () => tusRefusal('CHECKSUM_MISMATCH'),
  [ErrorReasons.NOT_A_FILE]: () => tusRefusal('NOT_A_FILE'),
  [ErrorReasons.PAST_LENGTH]: (e) => withBytes(e, 'PAST_LENGTH'),
  [ErrorReasons.PAST_MAX_SIZE]: (e) => withBytes(e, 'PAST_MAX_SIZE'),
  [ErrorReasons.LENGTH_FIXED]: (e) => withBytes(e, 'LENGTH_FIXED'),
  [ErrorReasons.LENGTH_BELOW_OFFSET]: (e) => withBytes(e, 'LENGTH_BELOW_OFFSET'),
  [ErrorReasons.LENGTH_OVER_MAX]: (e) => withBytes(e, 'LENGTH_OVER_MAX'),
};

function withBytes(e: PierError, name: 'PAST_LENGTH' | 'PAST_MAX_SIZE' | 'LENGTH_FIXED' | 'LENGTH_BELOW_OFFSET' | 'LENGTH_OVER_MAX'): TusRefusal | undefined {
  const bytes = bytesOf(e);
  return bytes === undefined ? undefined : tusRefusal(name, bytes);
}

/** An engine refusal as tus says it, by its reason; undefined for one without a tus text of its own. */
export function tusRefusalOf(e: PierError): TusRefusal | undefined {
  return e.reason === undefined ? undefined : BY_REASON[e.reason]?.(e);
}

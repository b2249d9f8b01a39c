/**
 * The one error table. Every failure Pier reports is a PierError whose `code` is a key of this
 * table; the edge alone turns it into an HTTP status (or, later, a WebSocket close code).
 * The status is also the `code` of the JSON envelope the client sees (docs/protocol.md "Conventions").
 */
export const ErrorTable = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  BAD_GATEWAY: 502,
  /** No actor answers the subject (NATS "no responders"), or a dependency is not ready. */
  UNAVAILABLE: 503,
  /** A bus request passed its deadline. */
  TIMEOUT: 504,
} as const;

export type ErrorCode = keyof typeof ErrorTable;

/** A failure of the process answering (5xx), not a refusal of what was asked (4xx). */
export const isFault = (code: ErrorCode) => ErrorTable[code] >= 500;

/**
 * Sub-codes, for the failures code must tell apart within one class: code decides on these,
 * never on a message's text, so a message can be reworded (the wire texts stay as the platform
 * defines them). They travel on the bus only; HTTP bodies keep the contract's `{code, message, data}`.
 * A reader that does not know a reason (an older or newer process) keeps the class alone.
 */
export const ErrorReasons = {
  /** A live writer holds the upload (409). */
  UPLOAD_BUSY: 'upload_busy',
  /** No upload of this user, app and protocol by that id (400 on the platform's protocol, 404 on tus). */
  UPLOAD_UNKNOWN: 'upload_unknown',
  /** The offset sent is not the upload's (400 on the platform's protocol, 409 on tus). */
  OFFSET_MISMATCH: 'offset_mismatch',
  /** A tus chunk did not match its `Upload-Checksum` (460). */
  CHECKSUM_MISMATCH: 'checksum_mismatch',
  /** An upload's path names a folder where a file is wanted (400). */
  NOT_A_FILE: 'not_a_file',
  /** A chunk goes past the upload's length (400; `data.bytes`: the length). */
  PAST_LENGTH: 'past_length',
  /** A chunk of an upload whose length is not declared yet would pass the largest size allowed (400; `data.bytes`: that size). */
  PAST_MAX_SIZE: 'past_max_size',
  /** A length declared for an upload whose length is known already, and another (400; `data.bytes`: the length). */
  LENGTH_FIXED: 'length_fixed',
  /** A length declared below what is written already (400; `data.bytes`: the offset). */
  LENGTH_BELOW_OFFSET: 'length_below_offset',
  /** A length declared above the largest size allowed (400; `data.bytes`: that size). */
  LENGTH_OVER_MAX: 'length_over_max',
  /** No such app installed for that user (404). */
  APP_UNKNOWN: 'app_unknown',
  /** Nothing answers the subject (no replica of the role runs). */
  NO_RESPONDERS: 'no_responders',
  /** The receiver does not speak the message's wire format (bus/envelope.ts): the sender may fall back. */
  UNSUPPORTED_VERSION: 'unsupported_version',
  /** A stored record is in a format this release cannot read (lib/state/record-format.ts): a later release wrote it (503). */
  RECORD_FORMAT: 'record_format',
} as const;

export type ErrorReason = (typeof ErrorReasons)[keyof typeof ErrorReasons];
const REASONS = new Set<string>(Object.values(ErrorReasons));

/** The wire form of an error, on the bus and (with a numeric code) in HTTP bodies. */
export interface WireError {
  code: ErrorCode;
  message: string;
  data?: unknown;
  reason?: ErrorReason;
}

export class PierError extends Error {
  override readonly name = 'PierError';
  readonly code: ErrorCode;
  readonly data: unknown;
  /** What code decides on within the class (ErrorReasons); undefined for most errors. */
  readonly reason: ErrorReason | undefined;

  constructor(code: ErrorCode, message: string, options: { data?: unknown; cause?: unknown; reason?: ErrorReason } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data;
    this.reason = options.reason;
  }

  /** Whether this is the failure `reason` names. */
  is(reason: ErrorReason): boolean {
    return this.reason === reason;
  }

  get status(): number {
    return ErrorTable[this.code];
  }

  toWire(): WireError {
    const wire: WireError = { code: this.code, message: this.message };
    if (this.data !== undefined) wire.data = this.data;
    if (this.reason !== undefined) wire.reason = this.reason;
    return wire;
  }

  static fromWire(wire: WireError): PierError {
    const code = wire.code in ErrorTable ? wire.code : 'INTERNAL';
    // A reason this process does not know is dropped: the class still holds.
    const reason = typeof wire.reason === 'string' && REASONS.has(wire.reason) ? wire.reason : undefined;
    return new PierError(code, String(wire.message), { data: wire.data, ...(reason ? { reason } : {}) });
  }
}

/**
 * Any thrown value as a PierError. Unknown failures become a generic 500 whose message says
 * nothing about internals: the original stays in `cause` for the log, never for the client.
 */
export function asPierError(err: unknown): PierError {
  if (err instanceof PierError) return err;
  return new PierError('INTERNAL', 'internal error', { cause: err });
}

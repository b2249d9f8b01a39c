/**
 * The one error table. Every failure Pier reports is a PierError whose `code` is a key of this
 * table; the edge alone turns it into an HTTP status (or, later, a WebSocket close code).
 * The status is also the `code` of the JSON envelope the client sees (CONTRACT.md section 0).
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

/** The wire form of an error, on the bus and (with a numeric code) in HTTP bodies. */
export interface WireError {
  code: ErrorCode;
  message: string;
  data?: unknown;
}

export class PierError extends Error {
  override readonly name = 'PierError';
  readonly code: ErrorCode;
  readonly data: unknown;

  constructor(code: ErrorCode, message: string, options: { data?: unknown; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.data = options.data;
  }

  get status(): number {
    return ErrorTable[this.code];
  }

  toWire(): WireError {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }

  static fromWire(wire: WireError): PierError {
    const code = wire.code in ErrorTable ? wire.code : 'INTERNAL';
    return new PierError(code, String(wire.message), { data: wire.data });
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

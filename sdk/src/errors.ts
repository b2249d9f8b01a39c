/**
 * Errors of every SDK call. Pier answers failures as `{code, message, data?}` with the HTTP status
 * of the failure's class (docs/protocol.md "Conventions"); the SDK keeps all three, and picks a subclass per
 * class so callers can `instanceof` instead of comparing numbers. `status` 0 means no answer came
 * (network, timeout, abort).
 */
export class PierError extends Error {
  override name = 'PierError';
  constructor(
    /** HTTP status of the answer; 0 when there was none. */
    readonly status: number,
    /** Pier's own `code` from the answer body (the upload API's `1`, otherwise the status). */
    readonly code: number,
    message: string,
    /** `data` of the answer, when it carried one (the upload record on "Invalid offset"). */
    readonly data?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Worth trying again later: no answer, rate limited, busy, or the server side failed. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 409 || this.status === 429 || this.status >= 500;
  }
}

export class BadRequestError extends PierError {
  override name = 'BadRequestError';
}
export class UnauthorizedError extends PierError {
  override name = 'UnauthorizedError';
}
export class ForbiddenError extends PierError {
  override name = 'ForbiddenError';
}
export class NotFoundError extends PierError {
  override name = 'NotFoundError';
}
export class ConflictError extends PierError {
  override name = 'ConflictError';
}
export class PayloadTooLargeError extends PierError {
  override name = 'PayloadTooLargeError';
}
export class RateLimitedError extends PierError {
  override name = 'RateLimitedError';
}
export class ServerError extends PierError {
  override name = 'ServerError';
}
/** No answer at all: the connection failed, timed out or was aborted (`cause` says which). */
export class NetworkError extends PierError {
  override name = 'NetworkError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(0, 0, message, undefined, options);
  }
}

const BY_STATUS: Record<number, typeof PierError> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  405: BadRequestError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitedError,
};

/** The typed error for an answer with a failing status and its (parsed, if JSON) body. */
export function errorFromAnswer(status: number, body: unknown, what: string): PierError {
  const envelope = body !== null && typeof body === 'object' ? (body as { code?: unknown; message?: unknown; data?: unknown }) : {};
  const code = typeof envelope.code === 'number' ? envelope.code : status;
  const message = typeof envelope.message === 'string' && envelope.message !== '' ? envelope.message : `${what} answered HTTP ${status}`;
  const Kind = BY_STATUS[status] ?? (status >= 500 ? ServerError : PierError);
  return new Kind(status, code, message, envelope.data);
}

/** Reads an answer's body as JSON when it is JSON; `undefined` when it is empty or not JSON. */
export async function readJson(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

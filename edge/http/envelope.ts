import type { PierError } from '../../bus/errors.js';
import type { HttpReply } from './http.js';

// The JSON envelope of docs/protocol.md "Conventions", built in one place so every listener answers alike.

/** The success envelope: `{code: 0, message, data}` (`data` left out when there is none). */
export function ok(data?: unknown, message = 'success'): HttpReply {
  return { status: 200, json: data === undefined ? { code: 0, message } : { code: 0, message, data } };
}

/** The error envelope: HTTP status and `code` are the same number. */
export function errorReply(err: PierError): HttpReply {
  const status = err.status;
  const json: Record<string, unknown> = { code: status, message: err.message };
  if (err.data !== undefined) json.data = err.data;
  return { status, json };
}

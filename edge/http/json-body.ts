import { PierError } from '../../bus/errors.js';
import type { HttpRequestData } from './http.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-depth.js';

/**
 * A request's body as a JSON object, or a 400 naming `body` and what is wrong with it. Every
 * JSON route parses through here, so the depth bound and the messages are the same everywhere.
 */
export function parseJsonBody(req: Pick<HttpRequestData, 'body'>): Record<string, unknown> {
  if (req.body.length === 0) throw new PierError('BAD_REQUEST', 'body: must be a JSON object');
  const text = req.body.toString('utf8');
  // Parsed, a structure this deep would overflow the stack of every recursive step after it.
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw new PierError('BAD_REQUEST', `body: JSON must not nest deeper than ${MAX_JSON_DEPTH} levels`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new PierError('BAD_REQUEST', 'body: is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new PierError('BAD_REQUEST', 'body: must be a JSON object');
  return value as Record<string, unknown>;
}

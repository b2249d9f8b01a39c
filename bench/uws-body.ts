import type { HttpResponse } from 'uWebSockets.js';

/**
 * The floors' one way to read a request body with uWS: the chunks copied (uWS reuses their memory),
 * `done` called once with the whole body unless the request was aborted. Answers whether it was.
 */
export function readBody(res: HttpResponse, done: (body: Buffer) => void): () => boolean {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  const parts: Buffer[] = [];
  res.onData((chunk, last) => {
    parts.push(Buffer.from(chunk.slice(0)));
    if (last && !aborted) done(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  });
  return () => aborted;
}

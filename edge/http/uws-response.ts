import { STATUS_CODES } from 'node:http';
import type { HttpResponse } from 'uWebSockets.js';
import type { HttpReply } from './http.js';

// Writing an HttpReply to a uWS response. uWS forbids touching a response once it was aborted or
// ended (it throws, and a throw in a uWS callback takes the process down), so every write here
// first asks the response's state.

/** What is known of one response, shared by the body reader and the writer. */
export interface ResponseState {
  aborted: boolean;
  /** The response was ended: uWS forbids touching `res` after that (a late resume would throw). */
  finished?: boolean;
  /** Set by whoever waits on the request, to be told of an abort (uWS calls nothing else then). */
  onAbort?: () => void;
  /** End the connection with this answer (`Connection: close`): its process is draining. */
  closeConnection?: boolean;
}

/** Status lines, each made once (a few dozen statuses at most: Pier answers its own). */
const statusLines = new Map<number, string>();
const statusLine = (status: number) => {
  let line = statusLines.get(status);
  if (line === undefined) statusLines.set(status, (line = `${status} ${STATUS_CODES[status] ?? ''}`.trimEnd()));
  return line;
};

function writeHead(res: HttpResponse, reply: HttpReply): void {
  res.writeStatus(statusLine(reply.status));
  if (reply.json !== undefined) res.writeHeader('content-type', 'application/json');
  const headers = reply.headers;
  // for-in over a plain object: no array of entries made per answer.
  for (const k in headers) res.writeHeader(k, headers[k]);
}

/** Resolves when uWS can take more data for this response, or it was aborted. */
function writable(res: HttpResponse, state: ResponseState): Promise<void> {
  return new Promise((resolve) => {
    const previous = state.onAbort;
    state.onAbort = () => {
      previous?.();
      resolve();
    };
    res.onWritable(() => {
      resolve();
      return true;
    });
  });
}

async function sendStream(res: HttpResponse, reply: HttpReply, stream: AsyncIterable<Uint8Array>, state: ResponseState): Promise<void> {
  res.cork(() => writeHead(res, reply));
  const it = stream[Symbol.asyncIterator]();
  try {
    for (let r = await it.next(); !r.done; r = await it.next()) {
      if (state.aborted) return;
      let ok = true;
      res.cork(() => {
        ok = res.write(r.value);
      });
      if (!ok) await writable(res, state);
    }
    if (!state.aborted) res.cork(() => res.end(undefined, state.closeConnection === true));
  } catch {
    // The status is already sent: the only honest signal left is to cut the connection.
    if (!state.aborted) res.close();
  } finally {
    state.finished = true;
    if (state.aborted) void it.return?.();
  }
}

/**
 * Writes `reply` (JSON, text, bytes, or a stream with backpressure); nothing once the client has gone.
 * A whole reply is written at once and nothing is returned; a stream's writing is returned to wait on
 * (no promise made for the usual answer).
 */
export function send(res: HttpResponse, reply: HttpReply, state: ResponseState): Promise<void> | undefined {
  if (state.aborted) return undefined;
  if (reply.stream) return sendStream(res, reply, reply.stream, state);
  const body = reply.json !== undefined ? JSON.stringify(reply.json) : (reply.body ?? reply.text ?? '');
  res.cork(() => {
    writeHead(res, reply);
    res.end(body, state.closeConnection === true);
  });
  state.finished = true;
  return undefined;
}

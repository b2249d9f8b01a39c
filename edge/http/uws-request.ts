import { Readable } from 'node:stream';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { PierError } from '../../bus/errors.js';
import type { HttpRequestData } from './http.js';
import type { ResponseState } from './uws-response.js';
import type { BlockPool } from './block-pool.js';

// Reading a request out of uWS: its head copied synchronously (uWS frees `req` at the first
// await), its body read whole under a limit or handed over as a stream with backpressure.

/** The names of a uWS pattern's `:name` parameters, in the order uWS numbers them. */
export function paramNamesOf(path: string): string[] {
  return path.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
}

const NO_BODY = Buffer.alloc(0);

type DataHandler = (chunk: ArrayBuffer, isLast: boolean) => void;

/**
 * What is given to uWS for a request's `onData` and `onAborted`. uWS keeps those functions, and so
 * everything their closures capture, until the connection's next request or its close: on a
 * keep-alive connection that can be seconds, so a request's whole context (its body chunks
 * included) outlived it, was copied by every young-generation collection meanwhile and then
 * promoted. These relays capture only a small slot, emptied when the request is over.
 */
function dataRelay(slot: { handler: DataHandler | null }): DataHandler {
  return (chunk, isLast) => slot.handler?.(chunk, isLast);
}

/** The `onAborted` handler of a response: it captures only its state (see dataRelay). */
export function abortRelay(state: ResponseState): () => void {
  return () => {
    state.aborted = true;
    state.onAbort?.();
  };
}

/** A path parameter as its handler reads it: %-escapes decoded (most have none: nothing to decode). */
function decodedParam(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw; // malformed %-escape: handlers validate the raw text
  }
}

/**
 * Everything a handler may read, copied out of `req` now; the body comes later (`body` is empty
 * until the caller sets it). A class, not an object literal with a getter: every request then has
 * the same shape and its lazy parts live on the prototype, not in closures made per request.
 * The remote address is asked of uWS only when read (a system call per request otherwise, and most
 * routes never read it), and only while the response is alive: once it was aborted or ended uWS
 * forbids touching it, and the address reads as empty. The query is parsed when first read.
 */
class CopiedRequest implements HttpRequestData {
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: Record<string, string> = {};
  readonly params: Record<string, string> = {};
  body: Buffer = NO_BODY;
  stream?: Readable = undefined;
  private parsedQuery: URLSearchParams | undefined = undefined;
  private address: string | undefined = undefined;

  constructor(
    private readonly res: HttpResponse,
    req: HttpRequest,
    paramNames: string[],
    private readonly state: ResponseState,
  ) {
    const headers = this.headers;
    req.forEach((k, v) => {
      headers[k] = v;
    });
    for (let i = 0; i < paramNames.length; i++) this.params[paramNames[i]] = decodedParam(req.getParameter(i));
    this.method = req.getMethod();
    this.path = req.getUrl();
    this.rawQuery = req.getQuery() ?? '';
  }

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.rawQuery));
  }

  get remoteAddress(): string {
    this.address ??= this.state.aborted || this.state.finished ? '' : Buffer.from(this.res.getRemoteAddressAsText()).toString();
    return this.address;
  }
}

export function copyRequest(res: HttpResponse, req: HttpRequest, paramNames: string[], state: ResponseState): HttpRequestData {
  return new CopiedRequest(res, req, paramNames, state);
}

/**
 * Reads the whole body up to `limit` bytes; a larger body is refused before it is buffered. With a
 * `gate`, nothing past what the socket already delivered is read until the gate passes: the
 * socket is paused at the first chunk, resumed on a pass. On a refusal the socket is resumed too,
 * so uWS drains the rest of the body unread (discarded, never buffered) and the connection lives on.
 */
export function readBody(res: HttpResponse, declared: string, limit: number, state: ResponseState, gate: Promise<unknown> | null): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const slot: { handler: DataHandler | null } = { handler: null };
    let done = false;
    /** The body is read, refused or abandoned: nothing more is taken, and uWS's relay lets go of this reader. */
    const finish = () => {
      done = true;
      slot.handler = null;
    };
    if (declared !== '' && Number(declared) > limit) {
      finish();
      reject(new PierError('PAYLOAD_TOO_LARGE', `body: must be at most ${limit} bytes`));
    }
    let complete = false;
    let open = gate === null;
    let paused = false;
    const resume = () => {
      if (paused && !state.aborted && !state.finished) res.resume();
      paused = false;
    };
    const settle = () => {
      if (done || !complete || !open) return;
      finish();
      // Most bodies come in one chunk, already copied: no second copy to join them.
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    };
    gate?.then(
      () => {
        open = true;
        resume();
        settle();
      },
      (err: unknown) => {
        if (done) return;
        finish();
        chunks.length = 0;
        resume();
        reject(err);
      },
    );
    slot.handler = done ? null : (chunk, isLast) => {
      if (done) return;
      size += chunk.byteLength;
      if (size > limit) {
        finish();
        reject(new PierError('PAYLOAD_TOO_LARGE', `body: must be at most ${limit} bytes`));
        return;
      }
      // uWS reuses the chunk's memory: copy it. Through a view, so a small chunk is copied into
      // Node's buffer pool rather than into an ArrayBuffer of its own (a malloc'd backing store per
      // request, which the collector tracks apart); a large one gets its own memory as before.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) complete = true;
      else if (!open && !paused) {
        paused = true;
        res.pause();
      }
      settle();
    };
    res.onData(dataRelay(slot));
    // An aborted request never calls onData again: settle so nothing waits forever.
    state.onAbort = () => {
      if (done) return;
      finish();
      reject(new PierError('BAD_REQUEST', 'request aborted'));
    };
  });
}

/**
 * The request body as a Node stream. When the reader falls behind, uWS stops reading the socket
 * (pause) until the stream asks for more (resume): memory stays at the stream's window. With a
 * `pool`, chunks are copied into its blocks, and the reader gives each back once nobody reads it
 * (block-pool.ts); otherwise each is a fresh copy.
 */
export function bodyStream(res: HttpResponse, state: ResponseState, pool?: BlockPool): Readable {
  let paused = false;
  const filler = pool?.filler();
  const stream = new Readable({
    highWaterMark: 256 * 1024,
    read() {
      if (paused && !state.aborted && !state.finished) {
        paused = false;
        res.resume();
      }
    },
  });
  const slot: { handler: DataHandler | null } = {
    handler: (chunk, isLast) => {
      if (state.finished) {
        filler?.close();
        return;
      }
      if (!stream.push(filler ? filler.copy(chunk) : Buffer.from(chunk.slice(0))) && !isLast) {
        paused = true;
        res.pause();
      }
      if (isLast) {
        filler?.close();
        stream.push(null);
        slot.handler = null;
      }
    },
  };
  res.onData(dataRelay(slot));
  state.onAbort = () => {
    filler?.close();
    slot.handler = null;
    stream.destroy(new PierError('BAD_REQUEST', 'request aborted'));
  };
  // A client may go away before the handler reads a byte (a tus PATCH waiting for its lock, say):
  // the 'error' of that destroy must not find the stream without a listener, which would take the
  // whole process down. The error stays on the stream (`errored`) for whoever reads it later.
  stream.on('error', () => undefined);
  return stream;
}

import { randomBytes } from 'node:crypto';
import type { Bus } from './bus.js';
import { decode, encode } from './codec.js';
import { PierError, type WireError } from './errors.js';
import { accept, answerable } from './rpc.js';
import { compile } from './validation.js';

const checkPull = compile({ seq: { type: 'number', integer: true, min: 0 } });

/**
 * Byte streams over the bus, pulled by the consumer one piece at a time: the producer answers
 * `{seq}` requests on its own subject with the next piece. Pulling is the flow control (a slow
 * consumer simply asks less often), and each piece stays far below NATS's 1 MiB max_payload.
 */
export const CHUNK_BYTES = 256 * 1024;
/** Bodies up to this size travel inside the request or reply itself, with no stream. */
export const INLINE_BYTES = 512 * 1024;

interface Piece {
  data: Uint8Array;
  end: boolean;
  error?: WireError;
}

/**
 * Who serves a stream names its subject, `pier.stream.<owner>.<random>`: the bus permissions let
 * the edge pull only what providers serve and the reverse (bus/permissions.ts).
 */
export const STREAM_OWNERS = ['edge', 'provider'] as const;
export type StreamOwner = (typeof STREAM_OWNERS)[number];
export const streamSubject = (owner: StreamOwner, id: string) => `pier.stream.${owner}.${id}`;

export interface ServedStream {
  /** Where the consumer pulls from. */
  subject: string;
  /** Resolves when the consumer took the last piece, or the stream was abandoned. */
  finished: Promise<void>;
  close(): void;
}

/**
 * Serves `source` on a fresh subject. Pieces are coalesced up to CHUNK_BYTES. A consumer that
 * stops pulling for `idleMs` abandons the stream: the source is closed and `finished` resolves.
 */
export function serveStream(bus: Bus, owner: StreamOwner, source: AsyncIterable<Uint8Array>, idleMs: number): ServedStream {
  const subject = streamSubject(owner, randomBytes(12).toString('hex'));
  const it = source[Symbol.asyncIterator]();
  let carry: Uint8Array | null = null;
  let expected = 0;
  let done = false;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  let idle = setTimeout(() => close(), idleMs);

  const close = () => {
    if (done) return;
    done = true;
    clearTimeout(idle);
    sub.unsubscribe();
    void it.return?.();
    finish();
  };

  async function nextPiece(): Promise<Piece> {
    const parts: Uint8Array[] = [];
    let size = 0;
    if (carry) {
      parts.push(carry);
      size = carry.byteLength;
      carry = null;
    }
    while (size < CHUNK_BYTES) {
      const r = await it.next();
      if (r.done) return { data: Buffer.concat(parts), end: true };
      parts.push(r.value);
      size += r.value.byteLength;
    }
    const all = Buffer.concat(parts);
    carry = all.byteLength > CHUNK_BYTES ? all.subarray(CHUNK_BYTES) : null;
    return { data: all.subarray(0, CHUNK_BYTES), end: false };
  }

  let queue = Promise.resolve();
  const sub = bus.subscribe(subject, (msg) => {
    if (!msg.reply || done || !answerable(msg)) return;
    const reply = msg.reply;
    // Pulls are answered strictly in order, one at a time.
    queue = queue.then(async () => {
      clearTimeout(idle);
      let piece: Piece;
      const pull = accept<{ seq: number }>(msg, checkPull);
      const seq = pull?.seq ?? -1;
      if (seq !== expected) piece = { data: new Uint8Array(0), end: true, error: { code: 'BAD_REQUEST', message: `stream piece ${seq} asked, ${expected} expected` } };
      else {
        try {
          piece = await nextPiece();
          expected++;
        } catch (err) {
          const e = err instanceof PierError ? err : new PierError('BAD_GATEWAY', 'stream source failed', { cause: err });
          piece = { data: new Uint8Array(0), end: true, error: e.toWire() };
        }
      }
      bus.publish(reply, encode(piece));
      if (piece.end) close();
      else idle = setTimeout(() => close(), idleMs);
    });
  });
  return { subject, finished, close };
}

/** Pulls a served stream to its end. A piece not answered within `timeoutMs` fails the stream. */
export async function* pullStream(bus: Bus, subject: string, timeoutMs: number): AsyncGenerator<Uint8Array> {
  for (let seq = 0; ; seq++) {
    const msg = await bus.request(subject, encode({ seq }), { timeoutMs });
    const piece = decode<Piece>(msg.data);
    if (piece.error) throw PierError.fromWire(piece.error);
    if (piece.data.byteLength > 0) yield piece.data;
    if (piece.end) return;
  }
}

/** A buffer as an async source of pieces (for serveStream). */
export async function* bufferSource(buf: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let off = 0; off < buf.byteLength; off += CHUNK_BYTES) yield buf.subarray(off, off + CHUNK_BYTES);
}

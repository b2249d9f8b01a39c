import { randomBytes } from 'node:crypto';
import type { Bus, Subscription } from './bus.js';
import { asPierError, PierError } from './errors.js';
import { at, type Addressed, type Exchange } from './exchange.js';
import { decode, encode } from './codec.js';
import { wireErrorOf } from './envelope.js';
import { offeredStream, OFFERED_STREAM, streamSubject, type Piece, type PieceKind, type StreamOwner } from './subjects-stream.js';
import { ask, serve } from './verbs.js';

/**
 * The one byte stream of the bus (docs/architecture.md, "The bus"): bytes pushed in pieces of at
 * most CHUNK_BYTES (far below NATS's 1 MiB max_payload), each piece a request of a `pieces`
 * exchange answered by its receiver, with at most `window` unanswered at once. The window is the
 * flow control: a receiver that answers a piece only once it has used it (written it, passed it
 * on) slows the sender to its own pace, and memory on both sides stays at `window` pieces.
 *
 * A stream ends with one piece of another kind: `end` (keep what came; its answer is the stream's
 * result), `abort` (the sender failed or its client went away) or `discard` (cut back what came).
 *
 * Used two ways: a PATCH's bytes to the upload replica's write session (which the edge knows by its
 * subject from `begin`), and large bodies between the edge and the provider actor, where the
 * producer *offers* the bytes on a subject of its own and the consumer *takes* them: it asks the
 * offer to push to a subject where it already listens (so no piece is sent before anyone hears it).
 * Its pieces, subjects and exchanges are declared in `subjects-stream.ts`; its verbs are here.
 */
export const CHUNK_BYTES = 256 * 1024;
/** Bodies up to this size travel inside the request or answer itself, with no stream. */
export const INLINE_BYTES = 512 * 1024;

/** A piece's answer: never a rejection (a piece in flight may fail before it is awaited, and an unawaited rejection would take the process down). */
export type PieceOutcome<Ack> = { ok: true; data: Ack } | { ok: false; error: PierError };

/** Sends one piece; its receiver's refusal or its silence is the outcome's error. */
export function sendPiece<Ack>(bus: Bus, ex: Addressed<Piece, Ack>, piece: Piece, timeoutMs = ex.timeoutMs): Promise<PieceOutcome<Ack>> {
  return ask(bus, ex, piece, { timeoutMs }).then(
    (data): PieceOutcome<Ack> => ({ ok: true, data }),
    (err: unknown): PieceOutcome<Ack> => ({ ok: false, error: asPierError(err) }),
  );
}

export interface PushOptions<Ack> {
  /** Pieces unanswered at once. */
  window: number;
  timeoutMs: number;
  /** Sees every byte in order as it goes (a tus checksum's digest). */
  onChunk?: (chunk: Uint8Array) => void;
  /** Runs once every byte is answered, before the end: a throw ends the stream with `discard` instead. */
  beforeEnd?: () => Promise<void>;
  /** The error a `beforeEnd` throw becomes, given the answer to the `discard`. */
  discarded?: (err: PierError, ack: Ack | undefined) => PierError;
  /**
   * Called once with each source chunk whose pieces were all answered ok, in order. Only for a
   * receiver that answers a piece once it no longer reads its bytes (the upload session answers
   * once the piece is written): its owner may then reuse the chunk's memory. A chunk with a piece
   * refused, unanswered or never sent is never passed: nobody can say who still reads it.
   */
  used?: (chunk: Uint8Array) => void;
}

const EMPTY = new Uint8Array(0);

/**
 * Pushes `source` to the receiver in pieces, at most `window` unanswered; resolves with the answer
 * to `end`. A source that fails, or a piece refused, ends the stream with `abort` and throws.
 */
export async function pushBytes<Ack>(bus: Bus, ex: Addressed<Piece, Ack>, source: AsyncIterable<Uint8Array>, options: PushOptions<Ack>): Promise<Ack> {
  let seq = 0;
  /** Pieces unanswered, oldest first; a chunk's last piece carries the chunk, for `used`. */
  const inflight: Array<{ outcome: Promise<PieceOutcome<Ack>>; lastOf: Uint8Array | null }> = [];
  const send = (kind: PieceKind, data: Uint8Array = EMPTY) => sendPiece(bus, ex, { seq: seq++, kind, data }, options.timeoutMs);
  const settleOldest = async () => {
    const { outcome, lastOf } = inflight.shift()!;
    const answered = await outcome;
    if (!answered.ok) throw answered.error;
    // Answers are settled in order and the first refusal throws: every earlier piece was answered ok.
    if (lastOf) options.used?.(lastOf);
  };
  try {
    // Pieces are the source's own chunks, sliced (never copied, never joined).
    for await (const chunk of source) {
      options.onChunk?.(chunk);
      for (let off = 0; off < chunk.byteLength; off += CHUNK_BYTES) {
        const last = off + CHUNK_BYTES >= chunk.byteLength;
        inflight.push({ outcome: send('data', chunk.subarray(off, off + CHUNK_BYTES)), lastOf: last ? chunk : null });
        if (inflight.length >= options.window) await settleOldest();
      }
    }
    while (inflight.length > 0) await settleOldest();
  } catch (err) {
    // The stream ends either way; a refused piece has already ended it on the receiver's side.
    // The abort says why, in the answer format's error (the taker of an offered stream throws it).
    await Promise.allSettled(inflight.map((p) => p.outcome));
    await send('abort', encode(asPierError(err).toWire()));
    throw err;
  }
  if (options.beforeEnd) {
    try {
      await options.beforeEnd();
    } catch (err) {
      const ack = await send('discard');
      const e = asPierError(err);
      throw options.discarded ? options.discarded(e, ack.ok ? ack.data : undefined) : e;
    }
  }
  const end = await send('end');
  if (!end.ok) throw end.error;
  return end.data;
}

/**
 * Pieces a receiver holds unanswered at most: twice the largest window a sender of Pier uses. A
 * sender that does not keep to its window (a thief of a role's credentials pushing without
 * waiting) has the rest refused at once, so what waits here stays bounded.
 */
export const MAX_WAITING_PIECES = 16;

/**
 * What a receiver's `handle` returns for a piece it has taken but answers later (the upload
 * session: the write is issued, its answer waits for the write's end). The next piece is handled
 * at once; this one's answer is `answer`, and it counts as unanswered until then.
 */
export class AnswerLater<Ack> {
  constructor(readonly answer: Promise<Ack>) {}
}

/**
 * Receives a stream's pieces on `subject`: `handle` takes each, strictly one after the other in
 * arrival order (the sender sends them in seq order), and answers it, at once or `AnswerLater`; a
 * throw is the piece's refusal. Past MAX_WAITING_PIECES unanswered, a piece is refused without
 * being kept.
 */
export function receiveBytes<Ack>(bus: Bus, ex: Exchange<Piece, Ack>, subject: string, handle: (piece: Piece) => Promise<Ack | AnswerLater<Ack>>): Subscription {
  let queue: Promise<unknown> = Promise.resolve();
  let waiting = 0;
  return serve(bus, at(ex, subject), (piece) => {
    if (waiting >= MAX_WAITING_PIECES) throw new PierError('RATE_LIMITED', `stream: more than ${MAX_WAITING_PIECES} pieces unanswered; keep to the window`);
    waiting++;
    const taken = queue.then(() => handle(piece));
    queue = taken.catch(() => undefined);
    return taken.then((t) => (t instanceof AnswerLater ? t.answer : t)).finally(() => waiting--);
  });
}

// Offered streams: large bodies between the edge and the provider actor.

const { take, pieces: offered } = offeredStream;
/** Pieces unanswered at once on an offered stream (1 MiB). */
const OFFER_WINDOW = 4;

export interface OfferedStream {
  /** Where the consumer takes it from. */
  subject: string;
  /** Resolves when the stream was pushed to its end, failed, or was never taken within `idleMs`. */
  finished: Promise<void>;
  close(): void;
}

/**
 * Offers `source` on a fresh subject of `owner`'s, for `taker` (the other role); the first take gets
 * it, pushed. Nobody taking it within `idleMs` closes it.
 */
export function offerBytes(bus: Bus, owner: StreamOwner, taker: StreamOwner, source: AsyncIterable<Uint8Array>, idleMs: number): OfferedStream {
  const subject = streamSubject(owner, randomBytes(12).toString('hex'));
  const takers = streamSubject(taker, '');
  let taken = false;
  let done = false;
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const close = () => {
    if (done) return;
    done = true;
    clearTimeout(idle);
    sub.unsubscribe();
    void source[Symbol.asyncIterator]().return?.();
    finish();
  };
  const idle = setTimeout(close, idleMs);
  const sub = serve(bus, at(take, subject), async ({ to }) => {
    if (taken || done) throw new PierError('CONFLICT', 'this stream was taken already');
    if (!to.startsWith(takers)) throw new PierError('FORBIDDEN', `to: a ${taker}'s stream subject is required`);
    taken = true;
    clearTimeout(idle);
    sub.unsubscribe();
    // Answered at once: the push goes on by itself, and a failure reaches the taker in its `abort`.
    void pushBytes(bus, at(offered, to), source, { window: OFFER_WINDOW, timeoutMs: idleMs })
      .catch(() => undefined)
      .finally(() => {
        done = true;
        finish();
      });
    return {};
  });
  return { subject, finished, close };
}

/**
 * Takes an offered stream: listens on a subject of `taker`'s, asks the offer to push there, and
 * yields the pieces in order. A piece is answered only once the consumer takes it, so the producer
 * goes at the consumer's pace. A piece not coming within `timeoutMs` fails it; a source that
 * failed fails it with the source's own error (a 413 stays a 413).
 */
export async function* takeBytes(bus: Bus, taker: StreamOwner, offer: string, timeoutMs: number): AsyncGenerator<Uint8Array> {
  // Only an offer of the other role: the take goes out with this process's rights.
  if (!OFFERED_STREAM.test(offer) || offer.startsWith(streamSubject(taker, ''))) throw new PierError('BAD_GATEWAY', 'the stream offered is not a stream subject');
  const to = streamSubject(taker, randomBytes(12).toString('hex'));
  const arrived: Array<{ piece: Piece; used: () => void }> = [];
  let wake: (() => void) | null = null;
  let expected = 0;
  let over = false;
  const sub = receiveBytes(bus, offered, to, (piece) => {
    if (over) return Promise.resolve({}); // the consumer is gone: nothing waits to be used
    if (piece.seq !== expected) throw new PierError('BAD_REQUEST', `stream piece ${piece.seq} came, ${expected} expected`);
    expected++;
    return new Promise<Record<string, never>>((used) => {
      arrived.push({ piece, used: () => used({}) });
      wake?.();
    });
  });
  let failure: PierError | null = null;
  // Answered at once by the offer (then it pushes), or refused: taken already, gone, not for us.
  ask(bus, at(take, offer), { to }, { timeoutMs }).catch((err: unknown) => {
    failure ??= asPierError(err);
    wake?.();
  });
  try {
    for (;;) {
      if (arrived.length === 0) {
        if (failure) throw failure;
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(() => {
            failure ??= new PierError('TIMEOUT', `stream ${offer}: no piece within ${timeoutMs} ms`);
            resolve();
          }, timeoutMs);
        });
        clearTimeout(timer);
        wake = null;
        continue;
      }
      const { piece, used } = arrived.shift()!;
      used();
      if (piece.kind === 'end') return;
      if (piece.kind !== 'data') throw abortError(piece);
      if (piece.data.byteLength > 0) yield piece.data;
    }
  } finally {
    over = true;
    sub.unsubscribe();
    // Pieces not used are answered: the producer's next ones meet nobody and it stops at once.
    for (const a of arrived.splice(0)) a.used();
  }
}

/** Why a stream was aborted: the error its `abort` carries (a source's 413 stays a 413), else a 502. */
function abortError(piece: Piece): PierError {
  let carried: unknown;
  try {
    carried = piece.data.byteLength > 0 ? decode(piece.data) : undefined;
  } catch {
    carried = undefined;
  }
  const wire = wireErrorOf(carried);
  return wire ? PierError.fromWire(wire) : new PierError('BAD_GATEWAY', 'the stream\'s source failed');
}

/** A buffer as a source of pieces (for offerBytes). */
export async function* bufferSource(buf: Uint8Array): AsyncGenerator<Uint8Array> {
  for (let off = 0; off < buf.byteLength; off += CHUNK_BYTES) yield buf.subarray(off, off + CHUNK_BYTES);
}

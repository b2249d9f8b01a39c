import type { Readable } from 'node:stream';
import type { Bus } from '../bus/bus.js';
import { asPierError, PierError, type WireError } from '../bus/errors.js';
import { sendPiece } from '../bus/pieces.js';
import { CHUNK_BYTES } from '../bus/stream.js';
import { chunksOf } from './stream-chunks.js';
import { type Piece, type PieceAck, type UploadRecord, type WriteSession } from '../bus/subjects.js';

const EMPTY = new Uint8Array(0);

/** Pieces in flight to the upload actor at once (at most 2 MiB): enough to keep disk and bus busy, bounded memory. */
const WINDOW = 8;

function ackError(ack: PieceAck): PierError {
  return ack.error ? PierError.fromWire(ack.error as WireError) : new PierError('INTERNAL', 'upload failed');
}

/**
 * Moves one PATCH's file part to its write session in pieces of at most 256 KiB, with at most
 * WINDOW unacknowledged: the file stream is read only as fast as the actor writes, so memory does
 * not grow with the chunk. A client that goes away mid-chunk ends the session with `abort` (what
 * was written is kept, fsynced, for a resume, if its offset was confirmed). `confirm`, when given,
 * runs once every byte is written and before the session ends: if it throws, the bytes are
 * discarded and its error is answered (with the upload's record, for "Invalid offset"); the tus
 * checksum runs there too, over the digest `onChunk` fed.
 */
export async function streamToSession(
  bus: Bus,
  session: WriteSession,
  file: Readable,
  timeoutMs: number,
  confirm?: () => Promise<void>,
  /** Sees every byte in order as it goes (a tus checksum's digest). */
  onChunk?: (chunk: Uint8Array) => void,
): Promise<{ record: UploadRecord; complete: boolean }> {
  let seq = 0;
  const inflight: Promise<PieceAck>[] = [];
  // Never rejects: a piece in flight may fail before it is awaited (the actor gone), and an
  // unawaited rejection would take the whole edge down.
  const send = (kind: Piece['kind'], data: Uint8Array = EMPTY): Promise<PieceAck> => sendPiece(bus, session.subject, seq++, kind, data, timeoutMs);
  const settleOldest = async () => {
    const ack = await inflight.shift()!;
    if (!ack.ok) throw ackError(ack);
  };
  try {
    // Pieces are the parser's own chunks (sliced, never copied, never joined), at most CHUNK_BYTES each.
    for await (const chunk of chunksOf(file)) {
      onChunk?.(chunk);
      for (let off = 0; off < chunk.byteLength; off += CHUNK_BYTES) {
        inflight.push(send('data', chunk.subarray(off, off + CHUNK_BYTES)));
        if (inflight.length >= WINDOW) await settleOldest();
      }
    }
    while (inflight.length > 0) await settleOldest();
  } catch (err) {
    // The session ends either way; a refused piece has already ended it on the actor's side.
    await Promise.allSettled(inflight);
    await send('abort');
    file.resume();
    throw err;
  }
  if (confirm) {
    try {
      await confirm();
    } catch (err) {
      const ack = await send('discard');
      const e = asPierError(err);
      throw e.data === undefined && ack.record ? new PierError(e.code, e.message, { data: ack.record, cause: e, ...(e.reason ? { reason: e.reason } : {}) }) : e;
    }
  }
  const end = await send('end');
  if (!end.ok || !end.record) throw ackError(end);
  return { record: end.record, complete: end.complete === true };
}

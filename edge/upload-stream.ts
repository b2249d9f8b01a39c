import type { Readable } from 'node:stream';
import type { Bus } from '../bus/bus.js';
import { decode, encode } from '../bus/codec.js';
import { PierError, type ErrorCode } from '../bus/errors.js';
import { CHUNK_BYTES } from '../bus/stream.js';
import type { Piece, PieceAck, UploadRecord, WriteSession } from '../bus/subjects.js';

/** Pieces in flight to the upload actor at once: enough to overlap disk and network, bounded memory. */
const WINDOW = 2;

function ackError(ack: PieceAck): PierError {
  return new PierError((ack.error?.code ?? 'INTERNAL') as ErrorCode, ack.error?.message ?? 'upload failed', { data: ack.error?.data });
}

/**
 * Moves one PATCH's file part to its write session in pieces of at most 256 KiB, with at most
 * WINDOW unacknowledged: the file stream is read only as fast as the actor writes, so memory does
 * not grow with the chunk. A client that goes away mid-chunk ends the session with `abort` (what
 * was written is kept, fsynced, for a resume).
 */
export async function streamToSession(bus: Bus, session: WriteSession, file: Readable, timeoutMs: number): Promise<{ record: UploadRecord; complete: boolean }> {
  let seq = 0;
  const inflight: Promise<PieceAck>[] = [];
  const send = (piece: Omit<Piece, 'seq'>) => bus.request(session.subject, encode({ seq: seq++, ...piece }), { timeoutMs }).then((m) => decode<PieceAck>(m.data));
  const settleOldest = async () => {
    const ack = await inflight.shift()!;
    if (!ack.ok) throw ackError(ack);
  };
  let parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of file as AsyncIterable<Buffer>) {
      parts.push(chunk);
      size += chunk.byteLength;
      while (size >= CHUNK_BYTES) {
        const all = Buffer.concat(parts);
        inflight.push(send({ data: all.subarray(0, CHUNK_BYTES) }));
        parts = [all.subarray(CHUNK_BYTES)];
        size = all.byteLength - CHUNK_BYTES;
        if (inflight.length >= WINDOW) await settleOldest();
      }
    }
    if (size > 0) inflight.push(send({ data: Buffer.concat(parts) }));
    while (inflight.length > 0) await settleOldest();
  } catch (err) {
    // The session ends either way; a refused piece has already ended it on the actor's side.
    await Promise.allSettled(inflight);
    await send({ abort: true }).catch(() => undefined);
    file.resume();
    throw err;
  }
  const end = await send({ end: true });
  if (!end.ok || !end.record) throw ackError(end);
  return { record: end.record, complete: end.complete === true };
}

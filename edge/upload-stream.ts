import type { Readable } from 'node:stream';
import type { Bus } from '../bus/bus.js';
import { pushBytes } from '../bus/byte-stream.js';
import { PierError } from '../bus/errors.js';
import { at } from '../bus/exchange.js';
import { chunksOf } from './stream-chunks.js';
import { uploadStream, type UploadRecord, type WriteSession } from '../bus/subjects.js';

/** Pieces in flight to the upload actor at once (at most 2 MiB): enough to keep disk and bus busy, bounded memory. */
const WINDOW = 8;

/**
 * Moves one PATCH's file part to its write session as a byte stream (bus/byte-stream.ts), at most
 * WINDOW pieces unanswered: the file stream is read only as fast as the actor writes, so memory does
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
  let end;
  try {
    end = await pushBytes(bus, at(uploadStream, session.subject), chunksOf(file), {
      window: WINDOW,
      timeoutMs,
      onChunk,
      beforeEnd: confirm,
      discarded: (e, ack) => (e.data === undefined && ack?.record ? new PierError(e.code, e.message, { data: ack.record, cause: e, ...(e.reason ? { reason: e.reason } : {}) }) : e),
    });
  } catch (err) {
    // Whatever the client still sends of this part is read and dropped.
    file.resume();
    throw err;
  }
  if (!end.record) throw new PierError('INTERNAL', 'upload failed');
  return { record: end.record, complete: end.complete === true };
}

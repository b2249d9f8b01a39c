/**
 * # A PATCH, from start to end
 *
 * Both upload protocols (the platform's, `upload-api.ts`, and tus, `tus-api.ts`) write a chunk the
 * same way, and it starts here. Compare tus-node-server's PatchHandler: check, lock, write, release.
 *
 * 1. **Check** (edge): the caller is identified from the request (`app-identity.ts`), the wire's
 *    headers and form fields are read (`tus-headers.ts`, `upload-api.ts`); nothing is read of the body yet.
 * 2. **Lock** (`upload.begin`, `actors/upload/handler.ts` `lockForWrite`): the upload must be the
 *    caller's, active, and at the offset the client sent (else `Invalid offset`, reason
 *    `offset_mismatch`, with the record). A PATCH in progress is waited for, up to a bound, then
 *    409 `upload busy` (`actors/upload/lock.ts`). The lock is a lease in the store, renewed while
 *    bytes flow; the replica holding it opens a write session (`actors/upload/session.ts`) on a
 *    subject of its own, and answers with it.
 * 3. **Write** (below, then the session): the body goes to the session as a byte stream
 *    (`bus/byte-stream.ts`), at most WINDOW pieces unanswered; the session writes each at its
 *    offset, the bytes past the chunk cap or `file_size` refused and cut back.
 * 4. **Fence** (the session's `close`): every write awaited and fsynced, then the new offset is
 *    recorded only if the lease still holds (`Lease.holds`): a session that lost its lock to a
 *    newer one records nothing and cuts nothing back.
 * 5. **Release**: the same record frees the lock; other replicas waiting for it are woken
 *    (`pier.upload.released`).
 * 6. **Publish**: a chunk that completes the upload moves the part to its target
 *    (`actors/upload/finish.ts`), then the upload is recorded done, the app's `upload.callback` and
 *    the bus event follow (`actors/upload/notify.ts`). Killed between any two steps, the upload is
 *    put right by `actors/upload/repair.ts` when it is next touched, or by the sweep.
 */
import type { Readable } from 'node:stream';
import type { Bus } from '../../bus/bus.js';
import { pushBytes } from '../../bus/byte-stream.js';
import { PierError } from '../../bus/errors.js';
import { at } from '../../bus/exchange.js';
import { chunksOf } from '../http/stream-chunks.js';
import { uploadStream, type UploadRecord, type WriteSession } from '../../bus/subjects.js';

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
  /** Gets each chunk of `file` back once the session has written all of it (its memory may be reused). */
  used?: (chunk: Uint8Array) => void,
): Promise<{ record: UploadRecord; complete: boolean }> {
  let end;
  try {
    end = await pushBytes(bus, at(uploadStream, session.subject), chunksOf(file), {
      window: WINDOW,
      timeoutMs,
      onChunk,
      used,
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

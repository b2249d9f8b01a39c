import { traced } from '../../bus/trace.js';
import type { FileHandle } from 'node:fs/promises';
import type { Bus, Subscription } from '../../bus/bus.js';
import { asPierError, ErrorReasons, PierError } from '../../bus/errors.js';
import { AnswerLater, receiveBytes } from '../../bus/byte-stream.js';
import { uploadStream, uploadSubjects, type Piece, type PieceAnswer } from '../../bus/subjects.js';
import { openPart } from './files.js';
import { finish } from './finish.js';
import type { UploadDeps } from './deps.js';
import { lockLost, type Lease } from './lock.js';
import { completes, recordOf, type Upload } from './store.js';

/**
 * A chunk past the upload's length, or past the largest size allowed while the length is not
 * declared yet: said by reason, with the figure (each protocol's edge says it in its own words).
 */
function pastSizeOf(u: Upload): PierError {
  const data = { bytes: u.fileSize };
  if (u.lengthDeferred) return new PierError('BAD_REQUEST', `file_size: the upload would pass the largest size allowed (${u.fileSize} bytes)`, { data, reason: ErrorReasons.PAST_MAX_SIZE });
  return new PierError('BAD_REQUEST', `file: the chunk goes past file_size (${u.fileSize} bytes)`, { data, reason: ErrorReasons.PAST_LENGTH });
}

const MAX_PENDING_WRITES = 8;

/**
 * One PATCH's bytes: pieces pulled in order from the edge, written at their offsets, fsynced before
 * the offset is recorded and acknowledged. A chunk over the cap or past `file_size` is cut back to
 * where the PATCH started; so is one whose offset was never confirmed (`file` sent before
 * `upload_offset`) when the edge says `discard`, or when it ends otherwise than with `end`. An abort
 * (or silence) of a confirmed PATCH keeps what was written, fsynced, for a resume.
 */
export class WriteSession {
  readonly subject: string;
  private fd: FileHandle | null = null;
  private sub: Subscription | null = null;
  private written = 0;
  private expected = 0;
  private queue = Promise.resolve();
  private idle: NodeJS.Timeout | null = null;
  private lastLease = 0;
  private done = false;
  /**
   * Writes in progress. A piece is taken once its write is issued, and the next one handled at
   * once: several pwrites at distinct offsets run in parallel in libuv's pool, which is far faster
   * than one at a time (the edge's window bounds how many). A piece is answered once its write has
   * ended: on the in-process bus the edge passed its bytes by reference, and reuses their memory
   * after that answer (docs/upload.md "Memory"). Nothing counts as durable before `close` awaited
   * them all and fsynced.
   */
  private readonly writes = new Set<Promise<unknown>>();
  private writeError: unknown = null;
  private upload: Upload;

  constructor(
    private readonly deps: UploadDeps & { bus: Bus; idleMs: number; wrote: (n: number) => void; failed: () => void },
    /** The upload's lock, held by this session until it ends (lock.ts). */
    private readonly lease: Lease,
    readonly maxBytes: number,
    /**
     * An abort keeps what was written: the client's offset was checked before the first byte, and
     * nothing waits for a check after the last (false: `file` came before `upload_offset`, or a tus
     * checksum is to be verified).
     */
    private readonly confirmed: boolean,
  ) {
    this.upload = lease.upload;
    this.subject = uploadSubjects.session(deps.busId, lease.session);
  }

  async start(): Promise<void> {
    this.fd = await openPart(this.upload.part, this.deps.root.userFolder(this.upload.user));
    // Bytes past the recorded offset were never acknowledged (a session that failed, or lost its
    // lock, left them): cut off here, by the session holding the lock now. A session that ends
    // never cuts back itself: it may have lost its lock without knowing, and its cut would drop
    // bytes the new holder acknowledged (lock.ts).
    await this.fd.truncate(this.upload.offset);
    // Pieces are taken strictly one after the other, in arrival order (the edge sends them in seq order).
    this.sub = receiveBytes(this.deps.bus, uploadStream, this.subject, (piece) => {
      const taken = this.queue.then(() => this.handle(piece).catch((err: unknown) => this.fail(err)));
      this.queue = taken.then(
        () => undefined,
        () => undefined,
      );
      return taken;
    });
    this.armIdle();
  }

  private armIdle(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      // Nobody waits on an idle close: its failure (a lost lock, most often) is counted, never unhandled.
      this.queue = this.queue.then(() => this.close(this.keepUnlessEnded())).then(
        () => undefined,
        () => this.deps.failed(),
      );
    }, this.deps.idleMs);
  }

  private async handle(p: Piece): Promise<PieceAnswer | AnswerLater<PieceAnswer>> {
    if (this.done) throw new PierError('BAD_REQUEST', 'write session is over');
    if (p.seq !== this.expected) throw new PierError('BAD_REQUEST', `piece ${p.seq} out of order (${this.expected} expected)`);
    this.expected++;
    this.armIdle();
    if (p.kind === 'end') return this.close('keep');
    if (p.kind === 'abort') return this.close(this.keepUnlessEnded());
    if (p.kind === 'discard') return this.close('discard');
    const data = p.data!;
    if (this.written + data.byteLength > this.maxBytes) {
      const pastSize = this.upload.offset + this.written + data.byteLength > this.upload.fileSize;
      await this.close('discard');
      throw pastSize ? pastSizeOf(this.upload) : new PierError('BAD_REQUEST', `file: a chunk may carry at most ${this.deps.chunkMaxBytes} bytes`);
    }
    if (this.writeError) throw this.writeError;
    const at = this.upload.offset + this.written;
    const write: Promise<unknown> = this.fd!.write(data, 0, data.byteLength, at)
      .catch((err: unknown) => {
        this.writeError ??= new PierError('INTERNAL', 'the upload could not be written to disk', { cause: err });
      })
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
    this.written += data.byteLength;
    // Backpressure: a sender past its window is not taken further while too many writes are
    // pending, so memory held here stays at MAX_PENDING_WRITES pieces whatever the disk's speed.
    while (this.writes.size >= MAX_PENDING_WRITES) await Promise.race(this.writes);
    this.deps.wrote(data.byteLength);
    await this.renewLease();
    return new AnswerLater(
      write.then(() => {
        if (this.writeError) throw this.writeError;
        return {};
      }),
    );
  }

  /** A session that ends without `end`: its bytes are worth keeping only if their offset was confirmed. */
  private keepUnlessEnded(): 'keep' | 'discard' {
    return this.confirmed ? 'keep' : 'discard';
  }

  /** Keeps the lock alive while bytes flow (a dead writer's lock lapses within one lease). */
  private async renewLease(): Promise<void> {
    const now = this.deps.now();
    if (now - this.lastLease < this.deps.locks.leaseMs / 3) return;
    this.lastLease = now;
    if (!(await this.lease.renew())) throw lockLost();
  }

  private async fail(err: unknown): Promise<never> {
    const e = asPierError(err);
    this.deps.failed();
    if (!this.done) await this.close('discard').catch(() => undefined); // the answer is the first error
    throw e;
  }

  /** Ends the session: fsync, record the offset, release the lock; publish when complete. */
  private async close(mode: 'keep' | 'discard'): Promise<PieceAnswer> {
    if (this.done) return { record: recordOf(this.upload) };
    this.done = true;
    if (this.idle) clearTimeout(this.idle);
    this.sub?.unsubscribe();
    try {
      await Promise.all([...this.writes]);
      if (this.writeError) mode = 'discard';
      // Discarded: the offset stays where the PATCH started; the bytes past it go when the next
      // session starts (or with recovery), under their own lock.
      if (mode === 'discard') this.written = 0;
      try {
        await traced('upload fsync', 'internal', () => this.fd!.sync());
      } finally {
        await this.fd!.close();
      }
      if (this.writeError) throw this.writeError;
      const offset = this.upload.offset + this.written;
      const updated: Upload = { ...this.upload, offset, lock: null, updatedAt: this.deps.now() };
      const record = async () => {
        const recorded = await this.deps.store.write((w) => {
          const u = w.get(updated.id);
          if (!this.lease.holds(u)) return false;
          w.put({ ...u!, offset, lock: null, updatedAt: updated.updatedAt });
          return true;
        });
        if (!recorded) throw lockLost();
      };
      this.upload = updated;
      if (completes(this.upload, offset)) {
        try {
          await finish(this.deps, updated, this.lease);
        } catch (err) {
          // Complete on disk, not published (conflict=fail): recorded, so a later PATCH retries.
          // Not recorded when the lock is gone (the done record may have released it before the
          // error): the answer is the first error, never the fence's 409, which would tell the
          // client nothing happened.
          await record().catch(() => undefined);
          throw err;
        }
        this.upload = { ...updated, state: 'done' };
        return { record: recordOf(this.upload), complete: true };
      }
      await record();
      return { record: recordOf(updated), complete: false };
    } finally {
      this.lease.end();
    }
  }
}

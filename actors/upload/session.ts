import { open, type FileHandle } from 'node:fs/promises';
import type { Bus, Subscription } from '../../bus/bus.js';
import { decode, encode } from '../../bus/codec.js';
import { asPierError, PierError } from '../../bus/errors.js';
import type { Piece, PieceAck } from '../../bus/subjects.js';
import { cutBack } from './files.js';
import { finish, type UploadDeps } from './handler.js';
import { recordOf, type Upload } from './store.js';

/**
 * One PATCH's bytes: pieces pulled in order from the edge, written at their offsets, fsynced before
 * the offset is recorded and acknowledged. A chunk over the cap or past `file_size` is cut back to
 * where the PATCH started; an abort (or silence) keeps what was written, fsynced, for a resume.
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

  constructor(
    private readonly deps: UploadDeps & { bus: Bus; idleMs: number; onEnd: () => void; wrote: (n: number) => void; failed: () => void },
    private upload: Upload,
    readonly maxBytes: number,
  ) {
    this.subject = `pier.upload.session.${deps.busId}.${upload.lock!.session}`;
  }

  async start(): Promise<void> {
    this.fd = await open(this.upload.part, 'r+');
    this.sub = this.deps.bus.subscribe(this.subject, (msg) => {
      const reply = msg.reply;
      this.queue = this.queue.then(async () => {
        const ack = await this.handle(decode<Piece>(msg.data)).catch((err: unknown) => this.fail(err));
        if (reply) this.deps.bus.publish(reply, encode(ack));
      });
    });
    this.armIdle();
  }

  private armIdle(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      this.queue = this.queue.then(() => this.close('keep')).then(() => undefined);
    }, this.deps.idleMs);
  }

  private async handle(p: Piece): Promise<PieceAck> {
    if (this.done) return { ok: false, error: { code: 'BAD_REQUEST', message: 'write session is over' } };
    if (p.seq !== this.expected) throw new PierError('BAD_REQUEST', `piece ${p.seq} out of order (${this.expected} expected)`);
    this.expected++;
    this.armIdle();
    if (p.abort) return this.close('keep');
    if (p.end) return this.close('keep');
    const data = p.data!;
    if (this.written + data.byteLength > this.maxBytes) {
      const pastSize = this.upload.offset + this.written + data.byteLength > this.upload.fileSize;
      await this.close('discard');
      throw new PierError('BAD_REQUEST', pastSize ? `file: the chunk goes past file_size (${this.upload.fileSize} bytes)` : `file: a chunk may carry at most ${this.deps.chunkMaxBytes} bytes`);
    }
    await this.fd!.write(data, 0, data.byteLength, this.upload.offset + this.written);
    this.written += data.byteLength;
    this.deps.wrote(data.byteLength);
    await this.renewLease();
    return { ok: true };
  }

  /** Keeps the lock alive while bytes flow (a dead writer's lock lapses within one lease). */
  private async renewLease(): Promise<void> {
    const now = this.deps.now();
    if (now - this.lastLease < this.deps.leaseMs / 3) return;
    this.lastLease = now;
    const { id } = this.upload;
    await this.deps.store.root.transaction(() => {
      const u = this.deps.store.uploads.get(id);
      if (u?.lock?.session === this.upload.lock!.session) this.deps.store.uploads.put(id, { ...u, lock: { ...u.lock, until: now + this.deps.leaseMs } });
    });
  }

  private async fail(err: unknown): Promise<PieceAck> {
    const e = asPierError(err);
    this.deps.failed();
    if (!this.done) await this.close('discard').catch(() => undefined);
    return { ok: false, error: { code: e.code, message: e.message, data: e.data } };
  }

  /** Ends the session: fsync, record the offset, release the lock; publish when complete. */
  private async close(mode: 'keep' | 'discard'): Promise<PieceAck> {
    if (this.done) return { ok: true, record: recordOf(this.upload) };
    this.done = true;
    if (this.idle) clearTimeout(this.idle);
    this.sub?.unsubscribe();
    try {
      if (mode === 'discard') {
        await cutBack(this.upload.part, this.upload.offset);
        this.written = 0;
      }
      await this.fd!.sync();
      await this.fd!.close();
      const offset = this.upload.offset + this.written;
      const updated: Upload = { ...this.upload, offset, lock: null, updatedAt: this.deps.now() };
      const record = () =>
        this.deps.store.root.transaction(() => {
          const u = this.deps.store.uploads.get(updated.id);
          if (u) this.deps.store.uploads.put(updated.id, { ...u, offset, lock: null, updatedAt: updated.updatedAt });
        });
      this.upload = updated;
      if (offset === this.upload.fileSize) {
        try {
          await finish(this.deps, updated);
        } catch (err) {
          await record(); // complete on disk, not published (conflict=fail): a later PATCH retries
          throw err;
        }
        this.upload = { ...updated, state: 'done' };
        return { ok: true, record: recordOf(this.upload), complete: true };
      }
      await record();
      return { ok: true, record: recordOf(updated), complete: false };
    } finally {
      this.deps.onEnd();
    }
  }
}

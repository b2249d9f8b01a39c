/**
 * Reused memory for request bodies read as a stream (tus uploads). uWS lends each chunk of a body
 * only for the length of its callback, so every byte must be copied out; copied into fresh array
 * buffers, an upload made about 8 MiB of garbage per PATCH and the collector took 30 % of the edge's
 * time (docs/performance.md "Uploads"). Here chunks are copied into blocks of BLOCK_BYTES, one
 * request's chunks one after the other in its own current block, and a block is used again once
 * every chunk copied into it was given back.
 *
 * A chunk is given back (`release`) only by whoever knows nobody reads it any more: the upload
 * edge, once the write session answered each of its pieces, which it does once they are written
 * (bus/byte-stream.ts `used`). A chunk never given back (the request failed, a piece went
 * unanswered, the body was drained unread) keeps its block from the pool, and the collector frees
 * the block when its last chunk is dropped, as it would a fresh copy: a mistake costs memory,
 * never bytes. A chunk given back twice, or not from this pool, is ignored.
 */

/** A block's size: a few of uWS's chunks (at most 512 KiB each here). */
export const BLOCK_BYTES = 1024 * 1024;

interface Block {
  readonly memory: Buffer;
  /** Chunks copied into it and not given back, plus one while a request still fills it. */
  holds: number;
}

const NOTHING = Buffer.alloc(0);

export class BlockPool {
  /** Blocks nobody holds, ready for use; at most `maxIdle`, the rest left to the collector. */
  private readonly idle: Block[] = [];
  /** The block of each chunk handed out, by the chunk's memory (weak: a dropped block goes). */
  private readonly blockOf = new WeakMap<ArrayBuffer, Block>();
  /** Chunks handed out and not given back: a second release, or a foreign chunk, is ignored. */
  private readonly lent = new WeakSet<Uint8Array>();
  /** Blocks made since the start (a figure for tests and the docs). */
  made = 0;

  constructor(
    /** Idle blocks kept: the memory the pool holds when no upload runs. */
    readonly maxIdle = 16,
    readonly blockBytes = BLOCK_BYTES,
  ) {}

  /** A filler for one request's body: its chunks go one after the other into its own blocks. */
  filler(): BlockFiller {
    return new BlockFiller(this);
  }

  /**
   * Another view of a block still held (a parser's slice of a lent chunk): it holds the block too,
   * until given back. A view of memory not from this pool, of a block nobody holds, or one already
   * counted, is ignored. Only while the chunk it was cut from is still lent: after that, the block
   * may be reused already.
   */
  retain(view: Uint8Array): void {
    const block = this.blockOf.get(view.buffer as ArrayBuffer);
    if (!block || block.holds === 0 || this.lent.has(view)) return;
    block.holds++;
    this.lent.add(view);
  }

  /** Gives a chunk back: once every chunk of its block is back (and no request fills it), the block is reused. */
  release(chunk: Uint8Array): void {
    if (!this.lent.delete(chunk)) return;
    const block = this.blockOf.get(chunk.buffer as ArrayBuffer);
    if (block) this.drop(block);
  }

  /** @internal A block to fill, idle or new. */
  take(): Block {
    const block = this.idle.pop();
    if (block) {
      block.holds = 1;
      return block;
    }
    this.made++;
    const memory = Buffer.allocUnsafeSlow(this.blockBytes);
    const made: Block = { memory, holds: 1 };
    this.blockOf.set(memory.buffer as ArrayBuffer, made);
    return made;
  }

  /** @internal A chunk of `block` handed out. */
  lend(block: Block, start: number, end: number): Buffer {
    const chunk = block.memory.subarray(start, end);
    block.holds++;
    this.lent.add(chunk);
    return chunk;
  }

  /** @internal One hold on `block` ended. */
  drop(block: Block): void {
    block.holds--;
    if (block.holds === 0 && this.idle.length < this.maxIdle) this.idle.push(block);
  }

  /** Blocks idle now. */
  get idleBlocks(): number {
    return this.idle.length;
  }
}

/** Copies one request's chunks into blocks of its own, one after the other. */
export class BlockFiller {
  private block: ReturnType<BlockPool['take']> | null = null;
  private filled = 0;
  private closed = false;

  constructor(private readonly pool: BlockPool) {}

  /** A copy of `chunk` (uWS's, lent for this callback only); larger than a block, a fresh one. */
  copy(chunk: ArrayBuffer): Buffer {
    const size = chunk.byteLength;
    if (size === 0) return NOTHING;
    if (this.closed || size > this.pool.blockBytes) return Buffer.from(chunk.slice(0));
    if (this.block === null || this.filled + size > this.pool.blockBytes) {
      if (this.block) this.pool.drop(this.block);
      this.block = this.pool.take();
      this.filled = 0;
    }
    const copy = this.pool.lend(this.block, this.filled, this.filled + size);
    copy.set(new Uint8Array(chunk));
    this.filled += size;
    return copy;
  }

  /** The request's body is over: its current block goes back once its chunks are. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.block) this.pool.drop(this.block);
    this.block = null;
  }
}

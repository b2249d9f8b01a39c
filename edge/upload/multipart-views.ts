import type { Readable } from 'node:stream';
import type busboy from 'busboy';
import type { BlockPool } from '../http/block-pool.js';

/**
 * Who still reads a pooled body chunk (edge/http/block-pool.ts) once busboy 1.6 has parsed it. Its
 * `_write` parses a chunk whole before it returns, and what it keeps of it afterwards is known:
 *
 * - the file part's bytes, as slices of the chunk pushed into the part's stream: each is retained
 *   as it is pushed, and given back by the upload (once written) or never (the collector's then);
 * - a field's bytes, as slices kept until the field's end, when they become its string and the
 *   'field' event fires;
 * - nothing else: part headers become strings, and a boundary's look-behind is busboy's own copy.
 *
 * Only the file part's bytes are worth the pool. A chunk parsed while no file part is open (the
 * form's head, its fields, what busboy skips: a long field past its 64 bytes, a preamble, an
 * unnamed part, bytes after the end) is parsed as a fresh copy, and its pooled memory given back at
 * once: whatever busboy keeps of it, and for however long, is the collector's. Holding the pooled
 * chunk instead until the next event let a client keep every byte of a form that never moves on in
 * memory. A chunk parsed in a file part is given back right after its parse if the part is still
 * open at its end; one where the part ended may hold the start of a field, so it is held until the
 * next 'field', 'file' or 'close': at most one chunk at a time, since the chunks after it are copies.
 * `test/unit/edge/multipart-views.test.ts` holds busboy to this: a field or a file cut at every
 * offset, with each block overwritten as soon as it is back.
 */
export function lendThroughBusboy(parser: busboy.Busboy, pool: BlockPool): void {
  let inFile = false;
  let held: Uint8Array | null = null;
  const giveBackHeld = () => {
    if (held) pool.release(held);
    held = null;
  };
  const writable = parser as unknown as { _write: (chunk: Buffer, encoding: BufferEncoding, done: (err?: Error | null) => void) => void };
  const parse = writable._write;
  writable._write = function (chunk, encoding, done) {
    if (!inFile) {
      const copy = Buffer.from(chunk);
      pool.release(chunk);
      parse.call(this, copy, encoding, done);
      return;
    }
    parse.call(this, chunk, encoding, done);
    if (inFile) pool.release(chunk);
    // Held only after a part ended in it; the chunks after it are copies until a part opens, and
    // that 'file' gave it back. Were one still held here, it is left to the collector, not given back.
    else held = chunk;
  };
  parser.on('field', giveBackHeld);
  parser.on('close', giveBackHeld);
  parser.on('file', (_name: string, file: Readable) => {
    giveBackHeld();
    inFile = true;
    const push = file.push;
    file.push = function (chunk: unknown, encoding?: BufferEncoding) {
      if (chunk === null) inFile = false;
      else if (chunk instanceof Uint8Array) pool.retain(chunk);
      return push.call(this, chunk, encoding);
    };
  });
}

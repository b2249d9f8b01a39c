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
 *   'field' event fires: a chunk parsed while no file part is open may hold a field begun in it, so
 *   it is held until the next 'field', 'file' or 'close';
 * - nothing else: part headers become strings, and a boundary's look-behind is busboy's own copy.
 *
 * So a chunk is given back right after its parse when a file part is open at its end, else at the
 * next of those events. `test/unit/edge/multipart-views.test.ts` holds busboy to this: a field or a
 * file cut at every offset, with each block overwritten as soon as it is back.
 */
export function lendThroughBusboy(parser: busboy.Busboy, pool: BlockPool): void {
  let inFile = false;
  let held: Uint8Array[] = [];
  const giveBackHeld = () => {
    for (const chunk of held) pool.release(chunk);
    held = [];
  };
  const writable = parser as unknown as { _write: (chunk: Buffer, encoding: BufferEncoding, done: (err?: Error | null) => void) => void };
  const parse = writable._write;
  writable._write = function (chunk, encoding, done) {
    parse.call(this, chunk, encoding, done);
    if (inFile) pool.release(chunk);
    else held.push(chunk);
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

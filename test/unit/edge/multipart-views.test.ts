import test from 'ava';
import busboy from 'busboy';
import type { Readable } from 'node:stream';
import { BlockPool } from '../../../edge/http/block-pool.js';
import { lendThroughBusboy } from '../../../edge/upload/multipart-views.js';

// edge/upload/multipart-views.ts: busboy 1.6 keeps slices of its input (a field's bytes until the
// field ends, the file part's bytes in its stream); a pooled chunk must not be reused before. Here a
// block is overwritten the moment it is free, and every field and file byte is read only at the end:
// a chunk given back too early shows as a wrong field or file.

class PoisoningPool extends BlockPool {
  taken = 0;
  freed = 0;
  override take(): ReturnType<BlockPool['take']> {
    this.taken++;
    return super.take();
  }
  override drop(block: Parameters<BlockPool['drop']>[0]): void {
    super.drop(block);
    if (block.holds > 0) return;
    this.freed++;
    block.memory.fill(0xee);
  }
}

const B = 'XyZbOuNdArY';
const fileBytes = Buffer.from(Array.from({ length: 150 }, (_, i) => (i * 7 + 3) % 251));
const field = (name: string, value: string) => `--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
const filePart = (bytes: Buffer) => Buffer.concat([Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`), bytes, Buffer.from('\r\n')]);
const bodies = {
  'offset first': Buffer.concat([Buffer.from(field('upload_offset', '1234567890')), filePart(fileBytes), Buffer.from(field('after', 'a-field-after-the-file')), Buffer.from(`--${B}--\r\n`)]),
  'file first': Buffer.concat([filePart(fileBytes), Buffer.from(field('upload_offset', '9876543210')), Buffer.from(`--${B}--\r\n`)]),
  // Bytes that look like the boundary inside the file: busboy's look-behind, its own copy.
  'near-boundaries in the file': Buffer.concat([Buffer.from(field('upload_offset', '42')), filePart(Buffer.concat([fileBytes.subarray(0, 40), Buffer.from(`\r\n--${B.slice(0, 6)}`), fileBytes.subarray(40)])), Buffer.from(`--${B}--\r\n`)]),
};

/** Parses `body` fed in pooled chunks of the given sizes; fields and file read only once the form is over. */
async function parse(body: Buffer, sizes: (at: number) => number, blockBytes: number) {
  const pool = new PoisoningPool(2, blockBytes);
  const filler = pool.filler();
  const bb = busboy({ headers: { 'content-type': `multipart/form-data; boundary=${B}` } });
  lendThroughBusboy(bb, pool);
  const fields: Record<string, string> = {};
  const views: Buffer[] = [];
  bb.on('field', (name, value) => (fields[name] = value));
  bb.on('file', (_name, file: Readable) => file.on('data', (c: Buffer) => views.push(c)));
  const closed = new Promise<void>((resolve, reject) => bb.on('close', resolve).on('error', reject));
  for (let at = 0; at < body.length; ) {
    const size = Math.min(sizes(at), body.length - at);
    const piece = new Uint8Array(body.subarray(at, at + size)).buffer; // what uWS lends
    bb.write(filler.copy(piece));
    at += size;
  }
  filler.close();
  bb.end();
  await closed;
  const file = Buffer.concat(views); // read now, after every earlier block was freed and poisoned
  for (const v of views) pool.release(v);
  return { fields, file, pool };
}

for (const [name, body] of Object.entries(bodies)) {
  const expected = name === 'near-boundaries in the file' ? Buffer.concat([fileBytes.subarray(0, 40), Buffer.from(`\r\n--${B.slice(0, 6)}`), fileBytes.subarray(40)]) : fileBytes;
  test(`${name}: cut once at every offset, and fed in chunks of 1 to 97 bytes, every field and file byte is as sent`, async (t) => {
    const wanted = name === 'file first' ? { upload_offset: '9876543210' } : name === 'offset first' ? { upload_offset: '1234567890', after: 'a-field-after-the-file' } : { upload_offset: '42' };
    const runs: Array<[string, (at: number) => number, number]> = [];
    for (let cut = 1; cut < body.length; cut++) runs.push([`cut at ${cut}`, (at) => (at < cut ? cut - at : body.length), 64]);
    for (const size of [1, 2, 3, 5, 13, 29, 47, 64, 97]) for (const blockBytes of [16, 32, 64, 128, 256]) runs.push([`${size}-byte chunks in ${blockBytes}-byte blocks`, () => size, blockBytes]);
    for (const [what, sizes, blockBytes] of runs) {
      const got = await parse(body, sizes, blockBytes);
      t.deepEqual(got.fields, wanted, `${what}: fields`);
      t.true(got.file.equals(expected), `${what}: file bytes`);
    }
  });
}

test('every block comes back once the form is parsed and the file\'s slices are given back', async (t) => {
  const { pool } = await parse(bodies['offset first'], () => 5, 32);
  t.true(pool.taken > 2, 'several blocks were used');
  t.is(pool.freed, pool.taken, 'every block taken came back');
});

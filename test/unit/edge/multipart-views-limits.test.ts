import test from 'ava';
import busboy from 'busboy';
import type { Readable } from 'node:stream';
import { BlockPool } from '../../../edge/http/block-pool.js';
import { lendThroughBusboy } from '../../../edge/upload/multipart-views.js';

// edge/upload/multipart-views.ts under appendChunk's own busboy limits (fields 8, fieldSize 64,
// files 1, fileSize), with hostile forms and a file part read slowly (busboy's deferred write
// callback and Writable buffering, so _write runs from clearBuffer): every block poisoned the moment
// it is free, everything read only at the end (from a review of the pooled upload bodies).

class PoisoningPool extends BlockPool {
  override drop(block: Parameters<BlockPool['drop']>[0]): void {
    super.drop(block);
    if (block.holds === 0) block.memory.fill(0xee);
  }
}

const B = 'XyZbOuNdArY';
const fileBytes = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7 + 3) % 251));
const field = (name: string, value: string, extra = '') => `--${B}\r\nContent-Disposition: form-data; name="${name}"\r\n${extra}\r\n${value}\r\n`;
const filePart = (name: string, bytes: Buffer) => Buffer.concat([Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`), bytes, Buffer.from('\r\n')]);
const long = 'L'.repeat(200); // past fieldSize 64: truncated
const bodies: Record<string, { body: Buffer; fields: Record<string, string>; file: Buffer }> = {
  'preamble, truncated field, charset field, second file, field after': {
    body: Buffer.concat([Buffer.from(`junk preamble\r\n`), Buffer.from(field('a', long)), Buffer.from(field('cs', 'caf\xe9', 'Content-Type: text/plain; charset=latin1\r\n'), 'latin1'), Buffer.from(field('upload_offset', '77')), filePart('file', fileBytes), filePart('file', Buffer.from('SECOND-FILE-BYTES')), Buffer.from(field('after', 'x'.repeat(60))), Buffer.from(`--${B}--\r\nepilogue bytes`)]),
    fields: { a: 'L'.repeat(64), cs: 'café', upload_offset: '77', after: 'x'.repeat(60) },
    file: fileBytes,
  },
  'a file not named file first, then the file': {
    body: Buffer.concat([filePart('other', Buffer.from('OTHER')), Buffer.from(field('upload_offset', '5')), Buffer.from(`--${B}--\r\n`)]),
    fields: { upload_offset: '5' },
    file: Buffer.from('OTHER'),
  },
  'file over fileSize, then a long field': {
    body: Buffer.concat([Buffer.from(field('upload_offset', '9')), filePart('file', Buffer.concat([fileBytes, fileBytes])), Buffer.from(field('z', long)), Buffer.from(`--${B}--\r\n`)]),
    fields: { upload_offset: '9', z: 'L'.repeat(64) },
    file: Buffer.concat([fileBytes, fileBytes]).subarray(0, 401),
  },
};

async function parse(body: Buffer, sizes: (at: number) => number, blockBytes: number, slow: boolean) {
  const pool = new PoisoningPool(2, blockBytes);
  const filler = pool.filler();
  const bb = busboy({ headers: { 'content-type': `multipart/form-data; boundary=${B}` }, highWaterMark: 32, fileHwm: 16, limits: { files: 1, fields: 8, fieldSize: 64, fileSize: 401 } });
  lendThroughBusboy(bb, pool);
  const fields: Record<string, string> = {};
  const views: Buffer[] = [];
  bb.on('field', (name, value) => (fields[name] = value));
  bb.on('file', (_name, file: Readable) => {
    file.on('data', (c: Buffer) => {
      views.push(c);
      if (slow) {
        file.pause();
        setImmediate(() => file.resume());
      }
    });
  });
  const closed = new Promise<void>((resolve, reject) => bb.on('close', resolve).on('error', reject));
  for (let at = 0; at < body.length; ) {
    const size = Math.min(sizes(at), body.length - at);
    bb.write(filler.copy(new Uint8Array(body.subarray(at, at + size)).buffer)); // not awaited: Writable buffers
    at += size;
  }
  filler.close();
  bb.end();
  await closed;
  const file = Buffer.concat(views);
  for (const v of views) pool.release(v);
  return { fields, file };
}

for (const [name, want] of Object.entries(bodies)) {
  test(`hostile: ${name}: fields and file as sent, blocks poisoned when free, fast and slow readers`, async (t) => {
    const runs: Array<[string, (at: number) => number, number]> = [];
    for (let cut = 1; cut < want.body.length; cut += 3) runs.push([`cut at ${cut}`, (at) => (at < cut ? cut - at : 97), 128]);
    for (const size of [1, 7, 13, 40]) for (const blockBytes of [48, 128]) runs.push([`${size}-byte chunks, ${blockBytes}-byte blocks`, () => size, blockBytes]);
    for (const slow of [false, true]) {
      for (const [what, sizes, blockBytes] of runs) {
        const got = await parse(want.body, sizes, blockBytes, slow);
        t.deepEqual(got.fields, want.fields, `${what} slow=${slow}: fields`);
        if (!got.file.equals(want.file)) t.fail(`${what} slow=${slow}: file bytes differ`);
      }
    }
    t.pass();
  });
}

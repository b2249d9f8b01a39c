import test from 'ava';
import { PassThrough, Readable } from 'node:stream';
import { chunksOf } from '../../../edge/http/stream-chunks.js';

test('hands on every chunk as pushed, in order, without joining them', async (t) => {
  const parts = [Buffer.from('ab'), Buffer.from('cde'), Buffer.from('f')];
  const got: Buffer[] = [];
  for await (const c of chunksOf(Readable.from(parts, { objectMode: false }))) got.push(c);
  t.deepEqual(got.map(String), ['ab', 'cde', 'f']);
  t.is(got[1], parts[1], 'the same buffer, not a copy');
});

test('a slow consumer pauses the source: at most `ahead` chunks wait', async (t) => {
  const source = new PassThrough({ highWaterMark: 4 });
  let written = 0;
  const producing = (async () => {
    for (let i = 0; i < 40; i++) {
      written++;
      if (!source.write(Buffer.alloc(4, i))) await new Promise((r) => source.once('drain', r));
    }
    source.end();
  })();
  let seen = 0;
  let mostAhead = 0;
  for await (const c of chunksOf(source, 2)) {
    seen++;
    t.is(c[0], seen - 1, 'in order');
    mostAhead = Math.max(mostAhead, written - seen);
    await new Promise((r) => setTimeout(r, 2));
  }
  await producing;
  t.is(seen, 40);
  // Two queued here, PassThrough's own buffers (4 bytes each side), and the one being written.
  t.true(mostAhead <= 6, `the producer ran ${mostAhead} chunks ahead`);
});

test('an error of the stream reaches the consumer after what came before it', async (t) => {
  const source = new PassThrough();
  source.write('one');
  setTimeout(() => source.destroy(new Error('disk on fire')), 5);
  const got: string[] = [];
  await t.throwsAsync(
    (async () => {
      for await (const c of chunksOf(source)) got.push(String(c));
    })(),
    { message: 'disk on fire' },
  );
  t.deepEqual(got, ['one']);
});

test('a stream closed before its end is an error, not a silent short read', async (t) => {
  const source = new PassThrough();
  source.write('half');
  setTimeout(() => source.destroy(), 5);
  await t.throwsAsync(
    (async () => {
      for await (const _ of chunksOf(source));
    })(),
    { code: 'ERR_STREAM_PREMATURE_CLOSE' },
  );
});

test('a consumer that stops early leaves no listener behind', async (t) => {
  const source = new PassThrough();
  source.write('a');
  source.write('b');
  for await (const _ of chunksOf(source)) break;
  t.is(source.listenerCount('data'), 0);
  t.is(source.listenerCount('end'), 0);
});

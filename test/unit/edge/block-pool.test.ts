import test from 'ava';
import { BlockPool } from '../../../edge/http/block-pool.js';

// edge/http/block-pool.ts: uWS's chunks copied into reused blocks, a block reused only once every
// chunk copied into it was given back. A mistake here writes one upload's bytes into another's file.

const chunkOf = (size: number, fill: number) => new Uint8Array(size).fill(fill).buffer;

test('chunks are copies, one after the other in one block, and the block is reused once all are back and the request is over', (t) => {
  const pool = new BlockPool(4, 1024);
  const filler = pool.filler();
  const a = filler.copy(chunkOf(300, 1));
  const b = filler.copy(chunkOf(300, 2));
  t.is(a.buffer, b.buffer, 'one block');
  t.true(a.every((x) => x === 1) && b.every((x) => x === 2), 'each its own bytes');
  t.is(pool.made, 1);
  pool.release(a);
  pool.release(b);
  t.is(pool.idleBlocks, 0, 'the request may still fill it: not reused yet');
  filler.close();
  t.is(pool.idleBlocks, 1, 'idle once the request is over');
  const again = pool.filler().copy(chunkOf(10, 3));
  t.is(again.buffer, a.buffer, 'reused');
  t.is(pool.made, 1);
});

test('a block with one chunk still lent is never handed out again, whatever else comes back', (t) => {
  const pool = new BlockPool(4, 1024);
  const filler = pool.filler();
  const kept = filler.copy(chunkOf(600, 7));
  const back = filler.copy(chunkOf(400, 8));
  filler.close();
  pool.release(back);
  pool.release(back); // twice: ignored, or `kept`'s block would count as free
  pool.release(new Uint8Array(kept.buffer, 0, 10)); // a view it never lent: ignored
  pool.release(Buffer.alloc(10)); // foreign
  t.is(pool.idleBlocks, 0);
  const others = pool.filler();
  for (let i = 0; i < 20; i++) t.not(others.copy(chunkOf(1000, 9)).buffer, kept.buffer, `copy ${i} in another block`);
  t.true(kept.every((x) => x === 7), 'the lent chunk is untouched');
  pool.release(kept);
  t.true(pool.idleBlocks <= 4, 'at most maxIdle blocks idle');
});

test('each request fills blocks of its own: one request holding its chunks never holds another\'s bytes', (t) => {
  const pool = new BlockPool(4, 1024);
  const one = pool.filler();
  const two = pool.filler();
  const a = one.copy(chunkOf(100, 1));
  const b = two.copy(chunkOf(100, 2));
  t.not(a.buffer, b.buffer);
});

test('a chunk larger than a block, an empty one, or one after the request is over is a fresh copy, never lent', (t) => {
  const pool = new BlockPool(4, 1024);
  const filler = pool.filler();
  const big = filler.copy(chunkOf(2000, 5));
  t.is(big.byteLength, 2000);
  t.true(big.every((x) => x === 5));
  t.is(pool.made, 0);
  t.is(filler.copy(new ArrayBuffer(0)).byteLength, 0);
  t.is(pool.made, 0);
  filler.close();
  filler.close();
  const late = filler.copy(chunkOf(10, 6));
  t.is(pool.made, 0, 'no block taken after close');
  t.true(late.every((x) => x === 6));
  pool.release(late);
  pool.release(big);
  t.is(pool.idleBlocks, 0);
});

test('the copy does not alias uWS\'s memory: changing the source afterwards changes nothing', (t) => {
  const pool = new BlockPool(4, 1024);
  const source = chunkOf(64, 1);
  const copy = pool.filler().copy(source);
  new Uint8Array(source).fill(0);
  t.true(copy.every((x) => x === 1));
});

test('idle blocks are bounded: many requests at once leave at most maxIdle blocks behind', (t) => {
  const pool = new BlockPool(3, 1024);
  const lent = Array.from({ length: 10 }, (_, i) => {
    const f = pool.filler();
    const c = f.copy(chunkOf(512, i));
    f.close();
    return c;
  });
  t.is(pool.made, 10);
  for (const c of lent) pool.release(c);
  t.is(pool.idleBlocks, 3);
});

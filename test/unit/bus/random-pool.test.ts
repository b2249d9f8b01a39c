import test from 'ava';
import { pooledRandom } from '../../../bus/random-pool.js';

test('pooled random bytes: never handed out twice, across refills; what was handed out never changes; large asks go straight to the source', (t) => {
  const handed: Buffer[] = [];
  const copies: Buffer[] = [];
  // 3 pools' worth of 12-byte nonces, and odd sizes that do not divide the pool.
  for (let i = 0; i < 1_100; i++) {
    const b = pooledRandom(i % 7 === 0 ? 29 : 12);
    handed.push(b);
    copies.push(Buffer.from(b));
  }
  t.true(handed.every((b, i) => b.length === (i % 7 === 0 ? 29 : 12)));
  t.true(handed.every((b, i) => b.equals(copies[i]!)), 'a refill replaces the pool; it never writes over bytes already handed out');
  t.is(new Set(copies.map((b) => b.toString('hex'))).size, copies.length, 'no two nonces alike');
  // No two views share memory.
  const spans = handed.map((b) => [b.buffer, b.byteOffset, b.byteOffset + b.length] as const);
  const overlapping = spans.filter(([buf, from, to], i) => spans.some(([other, f, e], j) => j !== i && other === buf && f < to && from < e));
  t.is(overlapping.length, 0);
  const large = pooledRandom(10_000);
  t.is(large.length, 10_000);
});

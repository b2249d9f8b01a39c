import test from 'ava';
import type { RootDatabase } from 'lmdb';
import { durably } from '../../../lib/state/lmdb-durable.js';

/** A root whose flush the test completes by hand. */
function fakeRoot() {
  let flush!: () => void;
  const flushed = new Promise<void>((r) => (flush = r));
  return { root: { flushed } as unknown as RootDatabase, flush };
}

test('a write is answered only after its commit is flushed, with the transaction result', async (t) => {
  const { root, flush } = fakeRoot();
  let answered = false;
  const write = durably(root, Promise.resolve('result')).then((v) => {
    answered = true;
    return v;
  });
  // The transaction has resolved and a macrotask has run after it, so every continuation of that
  // result has run: only the missing flush can hold the answer back now.
  await new Promise((r) => setImmediate(r));
  t.false(answered, 'committed but not yet on disk: not answered');
  flush();
  t.is(await write, 'result');
});

test('a failed transaction is thrown, without waiting for a flush', async (t) => {
  const { root } = fakeRoot();
  await t.throwsAsync(durably(root, Promise.reject(new Error('aborted'))), { message: 'aborted' });
});

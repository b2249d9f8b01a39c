import type { RootDatabase } from 'lmdb';

/**
 * A write transaction that resolves only once it is on disk. lmdb-js opens environments with
 * `overlappingSync` on Linux: a transaction's promise resolves when it is committed and visible,
 * and its fsync follows on its own. A process crash loses nothing then (the commit is in the page
 * cache), but an OS crash or a power cut could lose writes Pier had already acknowledged — an
 * upload's recorded offset (recovery would then cut acknowledged bytes off its part file), a
 * secret, a user. `root.flushed` resolves once every commit so far is synced; when the sync has
 * already happened (the usual case on a quiet store) it costs a few microseconds.
 */
export async function durably<T>(root: RootDatabase, transaction: Promise<T>): Promise<T> {
  const result = await transaction;
  await root.flushed;
  return result;
}

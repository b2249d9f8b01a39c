import { PierError } from '../../bus/errors.js';
import { keyIdOf } from '../../lib/crypto/secret-box.js';
import type { BucketView } from './bucket-view.js';
import type { Op } from './buffered-writer.js';

/**
 * How one attempt of a write on the JetStream store is committed (store-jetstream-write.ts): its
 * changes key by key, each an intent naming the revision it read (bucket-view.ts). Two rules make
 * an attempt all or nothing as far as the stream lets it be:
 *
 * - One change per key (`oneChangePerKey`): a key changed twice in one write (a deleted record
 *   replaced after the earlier one was destroyed) is committed once, with its last value, where
 *   its last change was made, naming the revision its first change read. Committed twice, the
 *   second intent names a revision the first has moved past and is refused: the write lost to
 *   itself.
 * - An attempt that loses to another writer puts back what it committed (`putBack`), newest first,
 *   before it reads the views again. Without it, a lost attempt's first changes stay (an operator's
 *   destroy and an undelete of the same deleted secret each committing half, both answering an
 *   error with the secret live again, or one answering ok over the other's half). A change that
 *   cannot be put back (another writer changed the key since: the one it lost to, or a third) is answered 503 and logged, never
 *   as done.
 *
 * Changes commit in the order the write made them, so a record is durable before anything that
 * names it (a value key before the box sealed under it, a version before the secret moves past
 * it). Only changes that nothing in their own run names go at once (`commitWaves`).
 */

/** `ops` with one change per (bucket, key), at the place of its last change, naming its first change's revision and value. */
export function oneChangePerKey(ops: readonly Op[]): Op[] {
  const lastAt = new Map<BucketView<unknown>, Map<string, number>>();
  ops.forEach((op, i) => {
    const keys = lastAt.get(op.view) ?? new Map<string, number>();
    keys.set(op.key, i);
    lastAt.set(op.view, keys);
  });
  // The buffered writer copies a key's first `expected` and `before` into its every later change.
  return ops.filter((op, i) => lastAt.get(op.view)!.get(op.key) === i);
}

/**
 * `ops` as the waves they commit in, each wave's changes at once, one wave after another. Two kinds
 * of runs commit as one wave:
 *
 * - kept versions put or removed, and new value keys: none of them names another (a version's box
 *   names the key it was sealed under, put before it, or in the same write before it: then it
 *   waits for the next wave), nothing names a version record, and what names them (the secret)
 *   comes in a later wave;
 * - value keys removed: each after every record that named it was removed, in an earlier wave
 *   (the writer removes a key after the last record holding it: value-key-erasure.ts).
 *
 * Every other change is a wave of its own. An update then waits for two quorum commits in a row
 * (its old value kept as a version with its new value's key, then the secret), not three; one
 * that also drops its oldest version, for three, not five.
 */
export function commitWaves(ops: readonly Op[], views: { versions: BucketView<unknown>; valueKeys: BucketView<unknown> }): Op[][] {
  const kindOf = (op: Op) => (op.view === views.versions || (op.view === views.valueKeys && op.value !== undefined) ? 'keep' : op.view === views.valueKeys ? 'drop-key' : 'alone');
  const waves: Op[][] = [];
  let run = null as { kind: string; ops: Op[]; keysPut: Set<string> } | null;
  for (const op of ops) {
    const kind = kindOf(op);
    const sealed = (op.value as { sealed?: unknown } | undefined)?.sealed;
    const sealedUnder = sealed instanceof Uint8Array ? keyIdOf(sealed) : undefined;
    const joins = kind !== 'alone' && run?.kind === kind && !(sealedUnder !== undefined && run.keysPut.has(sealedUnder));
    if (!joins) {
      run = { kind, ops: [], keysPut: new Set() };
      waves.push(run.ops);
    }
    run!.ops.push(op);
    if (op.view === views.valueKeys && op.value !== undefined) run!.keysPut.add(op.key);
  }
  return waves;
}

/** A change an attempt committed: at `seq`, in place of `op.before()`. */
export interface Committed {
  op: Op;
  seq: number;
}

/**
 * Puts back the changes of an attempt that lost, newest first, each naming the revision it
 * committed. `skip`: changes not put back here (a new value key is erased as a stray instead).
 */
export async function putBack(committed: readonly Committed[], skip: (c: Committed) => boolean, onFailed: (err: unknown, c: Committed) => void): Promise<void> {
  for (const c of [...committed].reverse()) {
    if (c.seq === 0 || skip(c)) continue;
    try {
      await c.op.view.commit(c.op.key, c.op.before(), c.seq);
    } catch (err) {
      onFailed(err, c);
      throw new PierError('UNAVAILABLE', 'a concurrent write of the same secret changed it while this one was undone; read it again and retry', { cause: err });
    }
  }
}

/** A random wait of up to 2^attempt ms (at most 64): what breaks the step of two writes that keep undoing each other. */
export function backOff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.random() * 2 ** Math.min(attempt + 1, 6)));
}

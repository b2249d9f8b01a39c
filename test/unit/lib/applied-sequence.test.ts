import test from 'ava';
import { AppliedSequence } from '../../../lib/state/applied-sequence.js';
import { within } from '../../helpers/wait.js';

test('a wait resolves once the sequence is applied, at once when it already is', async (t) => {
  const applied = new AppliedSequence('the log');
  applied.set(3);
  await within('a sequence already applied', applied.reached(2));
  const waiting = applied.reached(5);
  applied.set(4);
  applied.set(5);
  await within('sequence 5', waiting);
  t.is(applied.value, 5);
});

test('hostile: a wait for a sequence that never comes fails with UNAVAILABLE, naming whose, and leaves nothing behind', async (t) => {
  const applied = new AppliedSequence('the log');
  const err = await t.throwsAsync(within('the wait to give up', applied.reached(1_000, 50)));
  t.is((err as { code?: string }).code, 'UNAVAILABLE');
  t.regex(err!.message, /^the log: did not reach 1000/);
  t.is((applied as unknown as { waiters: unknown[] }).waiters.length, 0);
});

test('releaseAll wakes every waiter (the copy is closing)', async (t) => {
  const applied = new AppliedSequence('the log');
  const waits = [applied.reached(7), applied.reached(9)];
  applied.releaseAll();
  await within('both waiters', Promise.all(waits));
  t.is(applied.value, 0);
});

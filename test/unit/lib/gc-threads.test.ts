import test from 'ava';
import { gcThreadsHint, SINGLE_THREADED_GC } from '../../../lib/gc-threads.js';

test('one CPU and the default GC: the operator is told which flag to start node with', (t) => {
  const hint = gcThreadsHint(1, []);
  t.truthy(hint);
  t.true(hint!.includes(SINGLE_THREADED_GC), hint!);
});

test('one CPU with the flag already set, or more than one CPU: nothing to say', (t) => {
  t.is(gcThreadsHint(1, ['--max-old-space-size=512', SINGLE_THREADED_GC]), null);
  t.is(gcThreadsHint(2, []), null);
  t.is(gcThreadsHint(8, []), null);
});

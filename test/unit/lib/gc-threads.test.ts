import test from 'ava';
import { gcThreadsHint, SINGLE_THREADED_GC } from '../../../lib/runtime/gc-threads.js';

test('an edge on one CPU with the default GC: the operator is told which flag to start node with', (t) => {
  const hint = gcThreadsHint(['edge', 'vault'], 1, []);
  t.truthy(hint);
  t.true(hint!.includes(SINGLE_THREADED_GC), hint!);
});

test('nothing to say: the flag already set, more than one CPU, or no edge in the process', (t) => {
  t.is(gcThreadsHint(['edge'], 1, ['--max-old-space-size=512', SINGLE_THREADED_GC]), null);
  t.is(gcThreadsHint(['edge'], 2, []), null);
  t.is(gcThreadsHint(['edge'], 8, []), null);
  t.is(gcThreadsHint(['vault', 'upload'], 1, []), null);
});

import test from 'ava';
import { PassedGates } from '../../../edge/identity/call-gate.js';

test("a pass is remembered until the token's expiry or the memory's end, whichever is first", (t) => {
  const gates = new PassedGates(5_000, 10);
  gates.remember('a', 1_000 + 2_000, 1_000);
  t.true(gates.passed('a', 2_999));
  t.false(gates.passed('a', 3_000), 'the token expired');
  gates.remember('b', 1_000_000, 1_000);
  t.true(gates.passed('b', 5_999));
  t.false(gates.passed('b', 6_000), 'remembered at most memoryMs');
  t.false(gates.passed('never', 0));
});

test('remembered passes are bounded: past maxEntries the oldest go', (t) => {
  const gates = new PassedGates(5_000, 3);
  for (const k of ['a', 'b', 'c', 'd']) gates.remember(k, 10_000, 0);
  t.is(gates.size, 3);
  t.false(gates.passed('a', 1));
  t.true(gates.passed('d', 1));
});

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

test("by token and what it asks: a pass is for both, until the token's expiry or the memory's end", (t) => {
  const gates = new PassedGates(5_000, 10);
  gates.rememberFor('a', 'x', 1_000 + 2_000, 1_000);
  t.true(gates.passedFor('a', 'x', 2_999));
  t.false(gates.passedFor('a', 'y', 2_999), 'a pass is for what it was asked for');
  t.false(gates.passedFor('b', 'x', 2_999), 'and for its token');
  t.false(gates.passedFor('a', 'x', 3_000), 'the token expired');
  t.is(gates.size, 0, 'an expired pass is forgotten');
  gates.rememberFor('b', 'x', 1_000_000, 1_000);
  t.true(gates.passedFor('b', 'x', 5_999));
  t.false(gates.passedFor('b', 'x', 6_000), 'remembered at most memoryMs');
  t.false(gates.passedFor('never', 'x', 0));
});

test("by token and what it asks: bounded, past maxEntries the first token's oldest go", (t) => {
  const gates = new PassedGates(5_000, 3);
  for (const k of ['a', 'b', 'c', 'd']) gates.rememberFor(k, 'x', 10_000, 0);
  t.is(gates.size, 3);
  t.false(gates.passedFor('a', 'x', 1));
  t.true(gates.passedFor('d', 'x', 1));
  gates.rememberFor('b', 'y', 10_000, 0);
  gates.rememberFor('b', 'y', 10_000, 0);
  t.is(gates.size, 3, 'a pass remembered again is one pass');
  t.false(gates.passedFor('b', 'x', 1), "the first token's oldest went");
  t.true(gates.passedFor('b', 'y', 1));
  t.true(gates.passedFor('c', 'x', 1));
});

test('passes are found by their token\'s end, the whole token compared: another token ending alike has none, and takes the slot when it passes', (t) => {
  const gates = new PassedGates(5_000, 10);
  const end = 'e'.repeat(40);
  gates.rememberFor(`a.${end}`, 'x', 10_000, 0);
  gates.rememberFor(`a.${end}`, 'y', 10_000, 0);
  t.true(gates.passedFor(`a.${end}`, 'x', 1));
  t.false(gates.passedFor(`b.${end}`, 'x', 1), 'same end, another token');
  gates.rememberFor(`b.${end}`, 'x', 10_000, 0);
  t.true(gates.passedFor(`b.${end}`, 'x', 1));
  t.false(gates.passedFor(`a.${end}`, 'x', 1), 'the first token\'s passes went with its slot');
  t.is(gates.size, 1);
});

import test from 'ava';
import { CheckGate } from '../../../actors/token/check-gate.js';

/** A pair's failure count and limit, as the token actor keeps them. */
function pairState(limit: number) {
  let failures = 0;
  return { limit, fail: () => failures++, failures: () => failures, limited: () => failures >= limit };
}

test('concurrent bad proofs: at most the limit run; the rest wait, then get 429', async (t) => {
  const gate = new CheckGate(100);
  const p = pairState(3);
  let ran = 0;
  const attempt = async () => {
    const release = await gate.admit('k|a', 'a', p.limit, p.failures, p.limited);
    ran++;
    await new Promise((r) => setTimeout(r, 5));
    p.fail();
    release();
  };
  const results = await Promise.allSettled(Array.from({ length: 20 }, attempt));
  t.is(ran, 3);
  t.is(results.filter((r) => r.status === 'rejected').length, 17);
  t.true(results.every((r) => r.status === 'fulfilled' || /too many failed/.test((r.reason as Error).message)));
});

test('concurrent good proofs are queued, never refused', async (t) => {
  const gate = new CheckGate(100);
  const p = pairState(2);
  let running = 0;
  let most = 0;
  const attempt = async () => {
    const release = await gate.admit('k|a', 'a', p.limit, p.failures, p.limited);
    most = Math.max(most, ++running);
    await new Promise((r) => setTimeout(r, 2));
    running--;
    release();
  };
  const results = await Promise.allSettled(Array.from({ length: 12 }, attempt));
  t.true(results.every((r) => r.status === 'fulfilled'));
  t.is(most, 2, 'never more running than the limit');
});

test('per client address, checks running or waiting are bounded', async (t) => {
  const gate = new CheckGate(4);
  const p = pairState(1);
  const held = await gate.admit('k|a', 'a', p.limit, p.failures, p.limited);
  const waiting = [1, 2, 3].map(() => gate.admit('k|a', 'a', p.limit, p.failures, p.limited));
  await t.throwsAsync(gate.admit('k2|a', 'a', p.limit, p.failures, p.limited), { message: /too many proofs being checked/ });
  t.truthy(await gate.admit('k|b', 'b', 10, () => 0, () => false), 'another address is not affected');
  held();
  for (const w of waiting) (await w)();
});

test('over all addresses, checks running or waiting are bounded too', async (t) => {
  const gate = new CheckGate(4, 3);
  const free = () => gate.admit(`k|${Math.random()}`, `addr-${Math.random()}`, 10, () => 0, () => false);
  const held = await Promise.all([free(), free(), free()]);
  await t.throwsAsync(free(), { message: 'too many proofs being checked; retry later' });
  held[0]();
  (await free())();
  for (const release of held.slice(1)) release();
});

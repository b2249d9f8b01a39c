import test from 'ava';
import { CheckGate } from '../../../actors/token/check-gate.js';

/** A pair's failure count and limit, as the token actor keeps them. */
function pairState(limit: number) {
  let failures = 0;
  return { limit, fail: () => failures++, failures: () => failures, slowed: () => failures >= limit };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('concurrent bad proofs: at most the limit run at once; past it they are slowed (one at a time, spaced), not refused', async (t) => {
  const gate = new CheckGate({ maxRunningPerClient: 100, slowMs: 20 });
  const p = pairState(3);
  const starts: number[] = [];
  let running = 0;
  let most = 0;
  const attempt = async () => {
    const release = await gate.admit('k|a', 'a', p.limit, p.failures, p.slowed);
    starts.push(Date.now());
    most = Math.max(most, ++running);
    await sleep(2);
    running--;
    p.fail();
    release();
  };
  const results = await Promise.allSettled(Array.from({ length: 10 }, attempt));
  t.true(results.every((r) => r.status === 'fulfilled'));
  t.is(most, 3, 'never more running than the limit');
  // The seven past the limit each waited for the slow lane: their starts are at least slowMs apart.
  const slowed = starts.slice(3);
  for (let i = 1; i < slowed.length; i++) t.true(slowed[i] - slowed[i - 1] >= 18, `check ${i + 3} started ${slowed[i] - slowed[i - 1]} ms after the one before`);
});

test('S-4: bad proofs sent under an app\'s key from its own address slow its correct proof down, never refuse it', async (t) => {
  const gate = new CheckGate({ maxRunningPerClient: 32, slowMs: 10 });
  const p = pairState(10);
  // A provider that learnt the caller's key sends ten bad proofs (and more) from 127.0.0.1.
  for (let i = 0; i < 15; i++) {
    const release = await gate.admit('victim|127.0.0.1', '127.0.0.1', p.limit, p.failures, p.slowed);
    p.fail();
    release();
  }
  t.true(p.slowed());
  const release = await gate.admit('victim|127.0.0.1', '127.0.0.1', p.limit, p.failures, p.slowed);
  t.pass('the holder\'s check was admitted');
  release();
});

test('concurrent good proofs are queued, never refused', async (t) => {
  const gate = new CheckGate({ maxRunningPerClient: 100, slowMs: 10 });
  const p = pairState(2);
  let running = 0;
  let most = 0;
  const attempt = async () => {
    const release = await gate.admit('k|a', 'a', p.limit, p.failures, p.slowed);
    most = Math.max(most, ++running);
    await sleep(2);
    running--;
    release();
  };
  const results = await Promise.allSettled(Array.from({ length: 12 }, attempt));
  t.true(results.every((r) => r.status === 'fulfilled'));
  t.is(most, 2, 'never more running than the limit');
});

test('per client address, checks running are bounded (the rest wait); waiting ones per pair are bounded (429)', async (t) => {
  const gate = new CheckGate({ maxRunningPerClient: 2, maxWaitingPerPair: 3, slowMs: 10 });
  const free = () => 0;
  const open = () => false;
  const held = [await gate.admit('k|a', 'a', 10, free, open), await gate.admit('k2|a', 'a', 10, free, open)];
  let third = false;
  const waiting = gate.admit('k3|a', 'a', 10, free, open).then((r) => ((third = true), r));
  await sleep(20);
  t.false(third, 'a third check of the address waits while two run');
  t.truthy(await gate.admit('k|b', 'b', 10, free, open), 'another address is not affected');
  held[0]();
  (await waiting)();
  held[1]();
  // Waiting per pair: three may wait, the fourth is refused; another pair is not affected.
  const slow = new CheckGate({ maxRunningPerClient: 1, maxWaitingPerPair: 3, slowMs: 10 });
  const running = await slow.admit('p|x', 'x', 10, free, open);
  const queued = [1, 2, 3].map(() => slow.admit('p|x', 'x', 10, free, open));
  await t.throwsAsync(slow.admit('p|x', 'x', 10, free, open), { message: /too many proofs waiting for this app key/ });
  running();
  for (const q of queued) (await q)();
});

test('over all pairs, checks running or waiting are bounded too', async (t) => {
  const gate = new CheckGate({ maxRunningPerClient: 4, maxInFlight: 3, slowMs: 10 });
  const free = () => gate.admit(`k|${Math.random()}`, `addr-${Math.random()}`, 10, () => 0, () => false);
  const held = await Promise.all([free(), free(), free()]);
  await t.throwsAsync(free(), { message: 'too many proofs being checked; retry later' });
  held[0]();
  (await free())();
  for (const release of held.slice(1)) release();
});

test('a proof still waiting past its caller\'s deadline is dropped unchecked (TIMEOUT): a burst leaves no backlog behind it', async (t) => {
  // The gate's clock is the test's: a second of the slow lane passes without being waited out.
  const clock = { t: 1_000_000 };
  const gate = new CheckGate({ maxRunningPerClient: 32, slowMs: 1_000, now: () => clock.t });
  const p = pairState(1);
  p.fail();
  // The pair is slowed: one check a second. The first takes the slot, the next ones wait.
  const first = await gate.admit('k|a', 'a', p.limit, p.failures, p.slowed, clock.t + 5_000);
  const late = gate.admit('k|a', 'a', p.limit, p.failures, p.slowed, clock.t + 30);
  clock.t += 31; // its deadline passes while it waits (it looks again after 30 ms)
  await t.throwsAsync(late, { message: /waited past its deadline/ });
  first();
  // Its place was given back: a later one, still awaited, gets the next slot, a second on.
  clock.t += 1_000;
  const next = await gate.admit('k|a', 'a', p.limit, p.failures, p.slowed, clock.t + 5_000);
  next();
});

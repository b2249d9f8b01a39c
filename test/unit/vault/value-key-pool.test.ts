import test from 'ava';
import { randomBytes } from 'node:crypto';
import { MAX_AGE_MS, ValueKeyPool } from '../../../actors/vault/value-key-pool.js';
import type { PreparedKey } from '../../../actors/vault/values.js';

// Value keys reserved ahead of a scope's writes (actors/vault/value-key-pool.ts): as many as its
// write rate uses, none for a scope written now and then, never one too old or of another data key.

function pool(options: { failing?: boolean } = {}) {
  const clock = { now: 1_000_000 };
  const reserved: PreparedKey[][] = [];
  const failures: unknown[] = [];
  let gate: (() => void) | null = null;
  const p = new ValueKeyPool({
    newKey: (scope, dataKey) => {
      const idBytes = randomBytes(16);
      return { scope, dataKey, idBytes, id: idBytes.toString('hex'), valueKey: randomBytes(32), record: { format: 1, wrapped: randomBytes(60), at: clock.now } };
    },
    reserve: async (keys) => {
      reserved.push([...keys]);
      // A refill held open until the test lets it land (`land`), as a quorum round trip is.
      await new Promise<void>((resolve) => (gate = resolve));
      if (options.failing) throw new Error('stream out of reach');
    },
    now: () => clock.now,
    onFillFailed: (err) => void failures.push(err),
  });
  const land = async () => {
    const g = gate;
    gate = null;
    g?.();
    await new Promise((r) => setImmediate(r));
  };
  return { p, clock, reserved, failures, land };
}

/** `n` takes in one scope spread over one second of the fake clock, then the clock at the next second. */
async function writeAtRate(s: ReturnType<typeof pool>, dataKey: Buffer, n: number, scope = 's') {
  const got: Array<PreparedKey | undefined> = [];
  for (let i = 0; i < n; i++) {
    got.push(await s.p.take(scope, dataKey));
    s.clock.now += Math.floor(1_000 / n);
  }
  return got;
}

test('a scope written now and then keeps no key ahead: each write puts its own', async (t) => {
  const s = pool();
  const dataKey = randomBytes(32);
  for (let second = 0; second < 5; second++) {
    t.is(await s.p.take('s', dataKey), undefined);
    s.clock.now += 1_000;
  }
  t.deepEqual(s.reserved, [], 'nothing reserved for one write a second');
  t.is(s.p.held(), 0);
});

test('a busy scope gets keys reserved ahead, in one batch, about 100 ms of its rate; they are handed out once each', async (t) => {
  const s = pool();
  const dataKey = randomBytes(32);
  const first = await writeAtRate(s, dataKey, 200); // 200 writes in a second: no rate known yet
  t.true(first.every((k) => k === undefined), 'no key before the rate is known');
  // The next take knows the rate (200/s): a refill of 20 keys starts, and this take waits for it.
  const taking = s.p.take('s', dataKey);
  t.is(s.reserved.length, 1);
  t.is(s.reserved[0]!.length, 20);
  await s.land();
  const k = await taking;
  t.truthy(k, 'the take that started the refill gets a key from it');
  t.true(s.reserved[0]!.includes(k!));
  const handed = new Set([k!.id]);
  for (let i = 0; i < 10; i++) {
    const next = await s.p.take('s', dataKey);
    t.truthy(next);
    t.false(handed.has(next!.id), 'a key is handed out once');
    handed.add(next!.id);
  }
  t.is(s.reserved.length, 2, 'half empty: the next refill is under way');
  t.true(s.reserved[1]!.length <= 20);
});

test('a key older than its age, or wrapped by a data key since replaced, is never handed out', async (t) => {
  const s = pool();
  const dataKey = randomBytes(32);
  await writeAtRate(s, dataKey, 200);
  const taking = s.p.take('s', dataKey);
  await s.land();
  await taking;
  t.true(s.p.held() > 0);
  // The scope's data key replaced (a rekey): the keys wrapped by the old one are left to the sweep.
  const newer = randomBytes(32);
  const taking2 = s.p.take('s', newer);
  await s.land();
  const k = await taking2;
  t.truthy(k);
  t.true(k!.dataKey.equals(newer), 'a key of the new data key, from a refill made for it');
  t.true(s.reserved.at(-1)!.every((x) => x.dataKey.equals(newer)));
  t.true(s.p.held() > 0);
  // Past their age: none of those held is handed out (the take may start a refill: never waited on here).
  s.clock.now += MAX_AGE_MS + 1;
  const heldBefore = s.reserved.at(-1)!.map((x) => x.id);
  const late = s.p.take('s', newer);
  await s.land();
  const got = await late;
  t.false(got !== undefined && heldBefore.includes(got.id), 'a key past its age is not used');
});

test('a refill that fails is said, and the writes meanwhile put their own keys', async (t) => {
  const s = pool({ failing: true });
  const dataKey = randomBytes(32);
  await writeAtRate(s, dataKey, 200);
  const taking = s.p.take('s', dataKey);
  await s.land();
  t.is(await taking, undefined);
  t.is(s.failures.length, 1);
  t.is(s.p.held(), 0);
});

test('hostile: many scopes written fast hold a bounded number of keys ahead', async (t) => {
  const s = pool();
  const dataKey = randomBytes(32);
  // Every take lands its refill at once here: count what is held over 1,500 busy scopes.
  for (let scope = 0; scope < 1_500; scope++) {
    for (let i = 0; i < 700; i += 50) await s.p.take(`s${scope}`, dataKey); // 14 takes: no rate yet
  }
  s.clock.now += 1_000;
  // Each scope's second take sees a rate of 14/s: 2 keys ahead. Let every refill land.
  for (let scope = 0; scope < 1_500; scope++) {
    const taking = s.p.take(`s${scope}`, dataKey);
    await s.land();
    await taking;
  }
  t.true(s.p.held() <= 1_024 * 64, `held ${s.p.held()}`);
  t.true(s.p.held() <= 1_024 * 2, 'at most the busiest scopes keep their few keys');
  const reservedNow = s.reserved.flat().length;
  t.true(reservedNow <= 1_500 * 2, `reserved ${reservedNow}: never more than the rate's worth per scope`);
});

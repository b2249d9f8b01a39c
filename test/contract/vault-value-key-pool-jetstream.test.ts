import test from 'ava';
import { randomBytes } from 'node:crypto';
import { DataKeys } from '../../actors/vault/data-keys.js';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { scopeKey, secretFormatOf, secretKey, type VaultStore } from '../../actors/vault/store.js';
import { STRAY_MARGIN_MS, strayValueKeys } from '../../actors/vault/value-key-erasure.js';
import { Values, type PreparedKey } from '../../actors/vault/values.js';
import { Keyring } from '../../lib/crypto/keyring.js';
import { keyIdOf } from '../../lib/crypto/secret-box.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';

// Value keys reserved ahead of a busy scope's writes on JetStream (actors/vault/value-key-pool.ts):
// a create then commits its secret alone, the key being durable already; what is reserved and not
// used is a stray the sweep erases; a write that does not land leaves no record under its key.

const scope = scopeKey('alice', 'w', 'prod');

async function replicas(t: { teardown(fn: () => Promise<void>): void }) {
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 }));
  t.teardown(() => pair.close());
  return pair;
}

/**
 * Values over `store` on a clock the test moves (the pool learns a scope's rate per second of it),
 * and a create as the handler makes one (actors/vault/ops.ts `writing`): a key prepared first, then the write.
 */
function writer(store: VaultStore, keyring: Keyring, clock: { now: number }) {
  const values = new Values(store, new DataKeys(store, keyring, () => new Date(0)), () => true, { now: () => clock.now });
  /** A create: the key it was given, and what it sealed (none: the name was taken, by the time it wrote). */
  const create = async (name: string, value: string): Promise<{ prepared: PreparedKey | undefined; sealed?: Uint8Array }> => {
    const key = secretKey(scope, name);
    const prepared = store.secret(key) ? undefined : await values.prepare(scope);
    return store.write((w) => {
      if (w.secret(key)) return { prepared };
      const sealed = values.seal(scope, key, Buffer.from(value), w, undefined, prepared);
      w.putSecret(key, { ...secretFormatOf(sealed), gen: 'g', sealed, version: 1, createdAt: 'a', createdBy: 'x', updatedAt: 'a', updatedBy: 'x', history: [] });
      return { prepared, sealed };
    });
  };
  return { values, create };
}

/** `n` creates (names `prefix-i`), the test's clock moved through one second over them. */
async function burst(w: ReturnType<typeof writer>, clock: { now: number }, prefix: string, n: number) {
  const made = [];
  for (let i = 0; i < n; i++) {
    made.push(await w.create(`${prefix}-${i}`, `${prefix}-value-${i}`));
    clock.now += Math.floor(1_000 / n);
  }
  return made;
}

/**
 * Two replicas, each with a writer, after a first create (`first`, which makes the data key) and
 * two seconds of 150 creates a second on each, on names of its own: both pools warm.
 */
async function twoWarmReplicas(t: { teardown(fn: () => Promise<void>): void }, first: string) {
  const { a, b } = await replicas(t);
  const keyring = new Keyring(randomBytes(32));
  const clock = { now: Date.now() };
  const wa = writer(a, keyring, clock);
  const wb = writer(b, keyring, clock);
  await wa.create(first, 'v0');
  for (let i = 0; i < 300; i++) {
    await wa.create(`a-${i}`, `a-value-${i}`);
    await wb.create(`b-${i}`, `b-value-${i}`);
    clock.now += 6;
  }
  return { a, b, wa, wb, clock };
}

test('a busy scope: creates seal under keys reserved ahead and commit no key of their own; every value opens, on another replica too', async (t) => {
  const { a, another } = await replicas(t);
  const keyring = new Keyring(randomBytes(32));
  const clock = { now: Date.now() };
  const w = writer(a, keyring, clock);
  // One second of 150 creates: the pool learns the rate (no key is reserved ahead before).
  const first = await burst(w, clock, 'warm', 150);
  t.true(first.every((r) => r.sealed && r.prepared === undefined), 'no key ahead while the rate is not known');
  // What each of the next creates commits to the value keys' bucket, by key id.
  const view = (a as unknown as { valueKeysView: { commit: (key: string, ...rest: unknown[]) => Promise<number> } }).valueKeysView;
  const committedKeys: string[] = [];
  const commit = view.commit.bind(view);
  view.commit = (key, ...rest) => (committedKeys.push(key), commit(key, ...rest));
  const second = await burst(w, clock, 'busy', 150);
  const pooled = second.flatMap((r) => (r.sealed && r.prepared ? [{ prepared: r.prepared, sealed: r.sealed }] : []));
  t.true(pooled.length > 100, `most creates used a key reserved ahead (${pooled.length} of 150)`);
  for (const { prepared, sealed } of pooled) t.is(keyIdOf(sealed), prepared.id, 'sealed under the key reserved for it');
  // A reserved key is committed once, by its refill, never again by the create that uses it.
  for (const { prepared } of pooled) t.is(committedKeys.filter((k) => k === prepared.id).length, 1);
  const reader = new Values(await another(), new DataKeys(a, keyring, () => new Date(0)), () => true);
  for (const [prefix, made] of [['warm', first], ['busy', second]] as const) {
    for (let i = 0; i < made.length; i++) {
      const key = secretKey(scope, `${prefix}-${i}`);
      t.is(w.values.open(scope, key, a.secret(key)!.sealed).toString(), `${prefix}-value-${i}`);
      t.is(reader.open(scope, key, a.secret(key)!.sealed).toString(), `${prefix}-value-${i}`);
    }
  }
});

test('keys reserved ahead and never used are strays: the sweep erases them, and every secret still opens', async (t) => {
  const { a } = await replicas(t);
  const clock = { now: Date.now() };
  const w = writer(a, new Keyring(randomBytes(32)), clock);
  await burst(w, clock, 'warm', 150);
  await burst(w, clock, 'busy', 150);
  // The burst stops: what the pool still holds is named by no record.
  const stray = strayValueKeys(a, Date.now() + STRAY_MARGIN_MS + 1, 10_000);
  t.true(stray.length > 0, 'the pool left keys no record names');
  const named = new Set(a.everything().secrets.map((s) => keyIdOf(s.value.sealed)));
  t.false(stray.some((id) => named.has(id)), 'no key a record is sealed under counts as a stray');
  // Inside the margin, none is a stray yet: a write about to use one is safe.
  t.deepEqual(strayValueKeys(a, Date.now(), 10_000), []);
  await a.write((x) => stray.forEach((id) => x.removeValueKey(id)));
  for (let i = 0; i < 150; i++) {
    const key = secretKey(scope, `busy-${i}`);
    t.is(w.values.open(scope, key, a.secret(key)!.sealed).toString(), `busy-value-${i}`);
  }
});

test('two replicas creating the same names at once, each with keys reserved ahead: one wins each name, its value opens, and no record is sealed under a losing key', async (t) => {
  const { a, wa, wb, clock } = await twoWarmReplicas(t, 'first');
  const losing: string[] = [];
  let pooledRaces = 0;
  for (let i = 0; i < 40; i++) {
    const [ra, rb] = await Promise.all([wa.create(`same-${i}`, `a-${i}`), wb.create(`same-${i}`, `b-${i}`)]);
    t.true(!ra.sealed !== !rb.sealed, `exactly one create of same-${i} won`);
    const key = secretKey(scope, `same-${i}`);
    const [won, lost] = ra.sealed ? [ra, rb] : [rb, ra];
    if (won.prepared) pooledRaces++;
    if (lost.prepared) losing.push(lost.prepared.id);
    t.is(wa.values.open(scope, key, a.secret(key)!.sealed).toString(), ra.sealed ? `a-${i}` : `b-${i}`, 'the secret holds the winner value');
    clock.now += 6;
  }
  t.true(pooledRaces > 0, 'some races were won by a create under a key reserved ahead');
  // Every record names a key of its own, and that key is kept.
  const ids = a.everything().secrets.map((s) => keyIdOf(s.value.sealed)!);
  t.is(new Set(ids).size, ids.length, 'no two records share a value key');
  for (const id of ids) t.truthy(a.valueKey(id), `the key ${id} of a record is kept`);
  t.true(losing.length > 0, 'some losers had a key reserved ahead');
  t.false(losing.some((id) => ids.includes(id)), 'no record is sealed under a key its create did not land with');
});

test('two replicas updating one secret at once with keys reserved ahead: a retry after a lost attempt seals under a key of its own, and the lost attempt\'s reserved key is erased', async (t) => {
  const { a, b, wa, wb, clock } = await twoWarmReplicas(t, 'shared');
  const key = secretKey(scope, 'shared');
  /** An update as the handler makes one (no version kept here: the pool is what is looked at). */
  const update = async (w: ReturnType<typeof writer>, store: VaultStore, value: string) => {
    const prepared = await w.values.prepare(scope);
    const sealed = await store.write((x) => {
      const s = w.values.seal(scope, key, Buffer.from(value), x, undefined, prepared);
      x.putSecret(key, { ...secretFormatOf(s), gen: 'g', sealed: s, version: 1, createdAt: 'a', createdBy: 'x', updatedAt: 'a', updatedBy: 'x', history: [] });
      return s;
    });
    return { prepared, sealed };
  };
  const retriedKeys: string[] = [];
  for (let i = 0; i < 40; i++) {
    const results = await Promise.all([update(wa, a, `a-${i}`), update(wb, b, `b-${i}`)]);
    for (const r of results) if (r.prepared && keyIdOf(r.sealed) !== r.prepared.id) retriedKeys.push(r.prepared.id);
    clock.now += 6;
  }
  t.true(retriedKeys.length > 0, 'some update lost its first attempt and retried');
  await a.syncWithStreams();
  for (const id of retriedKeys) t.is(a.valueKey(id), undefined, `the reserved key ${id} of a lost attempt is erased`);
  t.truthy(a.valueKey(keyIdOf(a.secret(key)!.sealed)!), 'the secret\'s own key is kept');
  t.true(/^[ab]-39$/.test(wa.values.open(scope, key, a.secret(key)!.sealed).toString()), 'the secret opens to one of the last two values');
});

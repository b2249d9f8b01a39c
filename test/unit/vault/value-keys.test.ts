import test from 'ava';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { DataKeys } from '../../../actors/vault/data-keys.js';
import { scopeKey, secretKey, SECRET_FORMAT, type VaultStore } from '../../../actors/vault/store.js';
import { LmdbVaultStore } from '../../../actors/vault/store-lmdb.js';
import { Values } from '../../../actors/vault/values.js';
import { SLOT_BYTES } from '../../../actors/vault/value-key-slots.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { keyIdOf, open as openBox, plaintextSize, seal, sealKeyed } from '../../../lib/crypto/secret-box.js';

// Value keys on LMDB (docs/vault.md "Destroyed"): the slot file, its erasures, and the cache.

const scope = scopeKey('alice', 'w', 'prod');
const key = secretKey(scope, 's');

function lmdb(t: { teardown(fn: () => void | Promise<void>): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'pier-value-keys-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A store with a keyed writer and a reader of it (`values`). */
function keyed(store: VaultStore, keyring: Keyring, writes = true) {
  const keys = new DataKeys(store, keyring, () => new Date(0));
  return new Values(store, keys, () => writes);
}

/** A secret record holding `sealed` (the fields reads look at). */
const record = (sealed: Uint8Array, version = 1) => ({ ...SECRET_FORMAT, sealed, version, gen: 'g', createdAt: 'a', createdBy: 'x', updatedAt: 'a', updatedBy: 'x', history: [] });

test('a keyed box names its key, opens only under it, and its size is the plaintext size', (t) => {
  const k = randomBytes(32);
  const id = randomBytes(16);
  const box = sealKeyed(k, id, Buffer.from('hello'), 'ctx');
  t.is(keyIdOf(box), id.toString('hex'));
  t.is(plaintextSize(box), 5);
  t.is(openBox(k, box, 'ctx').toString(), 'hello');
  t.throws(() => openBox(randomBytes(32), box, 'ctx'), { message: /failed authentication/ });
  t.throws(() => openBox(k, box, 'other'), { message: /failed authentication/ });
  const plain = seal(k, Buffer.from('hello'), 'ctx');
  t.is(keyIdOf(plain), undefined);
  t.is(plaintextSize(plain), 5);
  t.throws(() => openBox(k, box.subarray(0, 20), 'ctx'), { message: /malformed/ }, 'a truncated keyed box is refused, not read past its end');
});

test('LMDB: a value key lives in a 0600 slot file, never in the environment; an erasure zeroes its slot on disk before the write answers', async (t) => {
  const dir = lmdb(t);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const values = keyed(store, new Keyring(randomBytes(32)));
  const sealed = await store.write((w) => {
    const s = values.seal(scope, key, Buffer.from('top-secret'), w);
    w.putSecret(key, record(s));
    return s;
  });
  const id = keyIdOf(sealed)!;
  const wrapped = Buffer.from(store.valueKey(id)!.wrapped);
  const slots = join(dir, 'value-keys.slots');
  t.is(statSync(slots).mode & 0o777, 0o600);
  t.true(readFileSync(slots).includes(wrapped), 'the wrapped key is in its slot');
  t.false(readFileSync(join(dir, 'data.mdb')).includes(wrapped), 'and not in the environment, whose freed pages would keep it');
  t.is(values.open(scope, key, store.secret(key)!.sealed).toString(), 'top-secret');
  await store.write((w) => w.removeSecret(key));
  t.is(store.valueKey(id), undefined);
  t.false(readFileSync(slots).includes(wrapped), 'zeros in its slot, at the answer');
  t.throws(() => values.open(scope, key, sealed), { message: /could not be decrypted/ }, 'the cache does not outlive the key');
});

test('LMDB: an erasure a crash left before its zeros is zeroed at the next open; a zeroed slot is reused', async (t) => {
  const dir = lmdb(t);
  const keyring = new Keyring(randomBytes(32));
  const first = LmdbVaultStore.open(dir, 'r1');
  const values = keyed(first, keyring);
  const sealed = await first.write((w) => {
    const s = values.seal(scope, key, Buffer.from('v'), w);
    w.putSecret(key, record(s));
    return s;
  });
  const wrapped = Buffer.from(first.valueKey(keyIdOf(sealed)!)!.wrapped);
  await first.close();
  // What a process killed between the erasure's commit and its zeros leaves: the key unreachable, its slot unzeroed.
  const root = open({ path: dir, compression: false });
  const index = root.openDB<number, string>({ name: 'value-key-slots' });
  const erasing = root.openDB<string, number>({ name: 'value-key-erasing' });
  await root.transaction(() => {
    erasing.put(index.get(keyIdOf(sealed)!)!, keyIdOf(sealed)!);
    index.remove(keyIdOf(sealed)!);
    root.openDB({ name: 'secrets' }).remove(key);
  });
  await root.close();
  t.true(readFileSync(join(dir, 'value-keys.slots')).includes(wrapped), 'the crash left the key in its slot (the check below can fail)');
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  t.false(readFileSync(join(dir, 'value-keys.slots')).includes(wrapped), 'zeroed at open, before anything is served');
  const again = keyed(store, keyring);
  await store.write((w) => w.putSecret(key, record(again.seal(scope, key, Buffer.from('w'), w))));
  t.is(readFileSync(join(dir, 'value-keys.slots')).length, SLOT_BYTES, 'the zeroed slot was taken again, the file did not grow');
});

test('LMDB: two replicas sharing an environment erase and reuse slots without zeroing each other\'s keys', async (t) => {
  const dir = lmdb(t);
  const keyring = new Keyring(randomBytes(32));
  const a = LmdbVaultStore.open(dir, 'r1');
  const b = LmdbVaultStore.open(dir, 'r2');
  t.teardown(async () => {
    await a.close();
    await b.close();
  });
  const va = keyed(a, keyring);
  const vb = keyed(b, keyring);
  const names = Array.from({ length: 40 }, (_, i) => secretKey(scope, `s${i}`));
  // Both write, update and remove at once; every value left must open under its own key.
  await Promise.all(
    names.map(async (name, i) => {
      const [store, values] = i % 2 === 0 ? [a, va] : [b, vb];
      await store.write((w) => w.putSecret(name, record(values.seal(scope, name, Buffer.from(`first-${i}`), w))));
      await store.write((w) => w.putSecret(name, record(values.seal(scope, name, Buffer.from(`second-${i}`), w), 2)));
      if (i % 3 === 0) await store.write((w) => w.removeSecret(name));
    }),
  );
  for (const [i, name] of names.entries()) {
    const live = a.secret(name);
    if (i % 3 === 0) t.is(live, undefined);
    else t.is(va.open(scope, name, live!.sealed).toString(), `second-${i}`);
  }
  const left = a.everything().valueKeys.map((k) => k.id).sort();
  const held = names.flatMap((n) => (a.secret(n) ? [keyIdOf(a.secret(n)!.sealed)!] : [])).sort();
  t.deepEqual(left, held, 'exactly the keys of live values are kept: each replaced or removed value took its key with it');
});

test('a value key moved with its value (kept as a version, brought back) stays; it goes with the last record holding it', async (t) => {
  const dir = lmdb(t);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const values = keyed(store, new Keyring(randomBytes(32)));
  const sealed = await store.write((w) => {
    const s = values.seal(scope, key, Buffer.from('v1'), w);
    w.putSecret(key, record(s));
    return s;
  });
  const id = keyIdOf(sealed)!;
  const vkey = `${key}\u0000g\u00000000000001`;
  // An update keeps the value as a version (the record moves past it): the key stays.
  await store.write((w) => {
    w.putVersion(vkey, { format: 2, oldestReader: 2, sealed, version: 1, at: 'a', by: 'x' });
    w.putSecret(key, record(values.seal(scope, key, Buffer.from('v2'), w), 2));
  });
  t.truthy(store.valueKey(id), 'kept with its version');
  t.is(values.open(scope, key, store.version(vkey)!.sealed).toString(), 'v1');
  await store.write((w) => w.removeVersion(vkey));
  t.is(store.valueKey(id), undefined, 'gone with the last record holding it');
});

test('unwrapped value keys are cached: a read unwraps once per key, not once per read', async (t) => {
  const dir = lmdb(t);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const keyring = new Keyring(randomBytes(32));
  const keys = new DataKeys(store, keyring, () => new Date(0));
  const values = new Values(store, keys, () => true);
  const sealed = await store.write((w) => {
    const s = values.seal(scope, key, Buffer.from('v'), w);
    w.putSecret(key, record(s));
    return s;
  });
  // A fresh reader (another process): the first read unwraps, the next ones use the cache.
  const reader = new Values(store, new DataKeys(store, keyring, () => new Date(0)), () => false);
  const first = reader.keyFor(scope, sealed);
  t.is(reader.keyFor(scope, sealed), first, 'the same unwrapped key, from the cache');
  t.is(reader.open(scope, key, sealed).toString(), 'v');
});

test('LMDB: a key prepared before its write is on disk first, used by the write, and one no write used is left for the sweep', async (t) => {
  const dir = lmdb(t);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const values = keyed(store, new Keyring(randomBytes(32)));
  t.is(await values.prepare(scope), undefined, 'no data key yet: nothing to prepare (the write makes its key itself)');
  await store.write((w) => w.putSecret(key, record(values.seal(scope, key, Buffer.from('first'), w))));
  const prepared = (await values.prepare(scope))!;
  t.true(readFileSync(join(dir, 'value-keys.slots')).includes(Buffer.from(prepared.record.wrapped)), 'in its slot before the write runs');
  const sealed = await store.write((w) => {
    const s = values.seal(scope, key, Buffer.from('second'), w, undefined, prepared);
    w.putSecret(key, record(s, 2));
    return s;
  });
  t.is(keyIdOf(sealed), prepared.id, 'the write sealed under the prepared key');
  t.is(values.open(scope, key, store.secret(key)!.sealed).toString(), 'second');
  const unused = (await values.prepare(scope))!;
  const { strayValueKeys, STRAY_MARGIN_MS } = await import('../../../actors/vault/value-key-erasure.js');
  t.deepEqual(strayValueKeys(store, Date.now() + STRAY_MARGIN_MS + 1, 10), [unused.id], 'a prepared key no write used is the sweep\'s');
});

test('a prepared key serves one attempt of its write: sealed again (a retry after a lost attempt), the value gets a key of its own', async (t) => {
  const dir = lmdb(t);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const values = keyed(store, new Keyring(randomBytes(32)));
  await store.write((w) => w.putSecret(key, record(values.seal(scope, key, Buffer.from('first'), w))));
  const prepared = (await values.prepare(scope))!;
  const [once, again] = await store.write((w) => [values.seal(scope, key, Buffer.from('second'), w, undefined, prepared), values.seal(scope, key, Buffer.from('second'), w, undefined, prepared)]);
  t.is(keyIdOf(once), prepared.id, 'the first attempt seals under the prepared key');
  t.not(keyIdOf(again), prepared.id, 'a second attempt makes its own');
  t.truthy(keyIdOf(again));
});

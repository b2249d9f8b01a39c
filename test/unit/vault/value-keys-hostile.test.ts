import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Conflict } from '../../../actors/vault/bucket-view.js';
import { DataKeys } from '../../../actors/vault/data-keys.js';
import { vaultImportBatch } from '../../../actors/vault/state-io.js';
import { scopeKey, secretFormatOf, secretKey, type SecretRecord } from '../../../actors/vault/store.js';
import { LmdbVaultStore } from '../../../actors/vault/store-lmdb.js';
import { JetStreamVaultStore } from '../../../actors/vault/store-jetstream.js';
import { strayValueKeys, STRAY_MARGIN_MS } from '../../../actors/vault/value-key-erasure.js';
import { Values } from '../../../actors/vault/values.js';
import { VersionUsage } from '../../../actors/vault/version-usage.js';
import { keepVersion, nextRecord } from '../../../actors/vault/versions.js';
import { destroy } from '../../../actors/vault/versions-deleted.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { keyIdOf } from '../../../lib/crypto/secret-box.js';

// Found by a hostile review of the value keys (issue #55): a write attempt that loses to another
// replica's leaves a value key behind; an import over a held key; keys no record names.

const scope = scopeKey('alice', 'chat', 'prod');
const key = secretKey(scope, 'motto');
const at = () => new Date(0).toISOString();
const BOUNDS = { perSecret: 10, scopeBytes: 1e9, appBytes: 1e9, deletedForMs: 1e9, scrubAfterMs: 60_000 };

/** A bucket view that keeps every intent it was sent, refused ones too (as a stream does), and can lose one race on purpose. */
class FakeView {
  entries = new Map<string, { value: unknown; revision: number }>();
  log: Array<{ seq: number; key: string; value: unknown }> = [];
  applied = { value: 0 };
  race: { key: string; value: unknown } | null = null;
  constructor(
    private readonly seq: { n: number },
    private readonly usage?: VersionUsage,
  ) {}
  revisionOf(k: string) {
    return this.entries.get(k)?.revision ?? 0;
  }
  private append(k: string, value: unknown, expected: number) {
    const s = ++this.seq.n;
    this.log.push({ seq: s, key: k, value });
    if (expected !== this.revisionOf(k)) throw new Conflict();
    const before = this.entries.get(k)?.value;
    if (value === undefined) this.entries.delete(k);
    else this.entries.set(k, { value, revision: s });
    this.usage?.changed(k, before as never, value as never);
    this.applied.value = s;
    return s;
  }
  async commit(k: string, value: unknown, expected: number) {
    if (value === undefined && expected === 0) return 0;
    if (this.race?.key === k) {
      const r = this.race;
      this.race = null;
      this.append(k, r.value, expected);
    }
    return this.append(k, value, expected);
  }
  async eraseBefore(k: string, s: number) {
    const n = this.log.length;
    this.log = this.log.filter((m) => !(m.key === k && m.seq < s));
    return n - this.log.length;
  }
}

test('JetStream: an update that lost its secret to another replica\'s write erases the value key its lost attempt committed', async (t) => {
  const seq = { n: 0 };
  const usage = new VersionUsage();
  const views = { keys: new FakeView(seq), secrets: new FakeView(seq), versions: new FakeView(seq, usage), deleted: new FakeView(seq), valueKeys: new FakeView(seq), usage };
  const Store = JetStreamVaultStore as unknown as new (...args: unknown[]) => JetStreamVaultStore;
  const failures: unknown[] = [];
  const store = new Store(null, views, { append: async () => undefined }, () => undefined, undefined, () => 0, (e: unknown) => failures.push(e));
  const values = new Values(store, new DataKeys(store, new Keyring(randomBytes(32)), () => new Date(0)), () => true);
  const update = (value: string) =>
    store.write((w) => {
      const existing = w.secret(key)!;
      const sealed = values.seal(scope, key, Buffer.from(value), w);
      keepVersion(w, BOUNDS, key, existing, 'app');
      w.putSecret(key, nextRecord(existing, sealed, 'app', at()));
    });
  await store.write((w) => {
    const sealed = values.seal(scope, key, Buffer.from('v1'), w);
    w.putSecret(key, { ...secretFormatOf(sealed), gen: 'g1', sealed, version: 1, createdAt: at(), createdBy: 'app', updatedAt: at(), updatedBy: 'app', history: [] });
  });
  // Another replica's write of the record lands between this one's version and its record.
  views.secrets.race = { key, value: { ...(views.secrets.entries.get(key)!.value as SecretRecord), updatedBy: 'other' } };
  await update('v2-to-be-destroyed');
  await update('v3');
  await store.write((w) => destroy(w, key, 2));
  t.deepEqual(failures, []);
  // Every record the secrets stream still holds (the refused intent included): none opens to the destroyed value.
  const opened = views.secrets.log.flatMap((m) => {
    const sealed = (m.value as SecretRecord | undefined)?.sealed;
    if (!sealed) return [];
    try {
      return [values.open(scope, key, sealed).toString()];
    } catch {
      return [];
    }
  });
  t.false(opened.includes('v2-to-be-destroyed'), `the secrets stream opens to: ${opened.join(', ')}`);
  t.true(opened.includes('v3'), 'the live value opens (the reading would find it)');
  const held = new Set([...views.secrets.entries.values(), ...views.versions.entries.values()].map((e) => keyIdOf((e.value as SecretRecord).sealed)));
  t.deepEqual([...views.valueKeys.entries.keys()].filter((id) => !held.has(id)), [], 'no value key is left that no record names');
});

test('LMDB: an import batch cannot replace a held value key, refused or not; the same bytes again are a no-op', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vk-import-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const keyring = new Keyring(randomBytes(32));
  const values = new Values(store, new DataKeys(store, keyring, () => new Date(0)), () => true);
  await store.write((w) => {
    const sealed = values.seal(scope, key, Buffer.from('precious'), w);
    w.putSecret(key, { ...secretFormatOf(sealed), gen: 'g', sealed, version: 1, createdAt: at(), createdBy: 'a', updatedAt: at(), updatedBy: 'a', history: [] });
  });
  const id = keyIdOf(store.secret(key)!.sealed)!;
  const forged = { kind: 'valueKey' as const, key: id, value: { wrapped: randomBytes(61) } };
  await t.throwsAsync(vaultImportBatch(store, [forged, { kind: 'secret', key: 'x', value: {} }], keyring));
  await t.throwsAsync(vaultImportBatch(store, [forged], keyring), { message: /a different key is held under this id/ });
  t.is(values.open(scope, key, store.secret(key)!.sealed).toString(), 'precious', 'the value still opens');
  const same = { kind: 'valueKey' as const, key: id, value: { wrapped: store.valueKey(id)!.wrapped } };
  t.like(await vaultImportBatch(store, [same], keyring), { imported: 1 });
  t.is(values.open(scope, key, store.secret(key)!.sealed).toString(), 'precious');
});

test('the sweep takes value keys no record names once past the margin, never one a record holds', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-vk-stray-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const values = new Values(store, new DataKeys(store, new Keyring(randomBytes(32)), () => new Date(0)), () => true);
  const held = await store.write((w) => {
    const sealed = values.seal(scope, key, Buffer.from('kept'), w);
    w.putSecret(key, { ...secretFormatOf(sealed), gen: 'g', sealed, version: 1, createdAt: at(), createdBy: 'a', updatedAt: at(), updatedBy: 'a', history: [] });
    return keyIdOf(sealed)!;
  });
  const stray = randomBytes(16).toString('hex');
  await store.write((w) => w.putValueKey(stray, { format: 1, wrapped: randomBytes(61), at: Date.now() }));
  t.deepEqual(strayValueKeys(store, Date.now(), 100), [], 'within the margin: a write may still be on its way to its record');
  t.deepEqual(strayValueKeys(store, Date.now() + STRAY_MARGIN_MS + 1, 100), [stray], 'past it: only the key no record names');
  t.false(strayValueKeys(store, Date.now() + STRAY_MARGIN_MS + 1, 100).includes(held));
});

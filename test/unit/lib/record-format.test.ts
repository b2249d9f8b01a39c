import test from 'ava';
import { open } from 'lmdb';
import { scopeKey, secretKey, sizeOf } from '../../../actors/vault/store.js';
import { LmdbVaultStore } from '../../../actors/vault/store-lmdb.js';
import { ErrorReasons } from '../../../bus/errors.js';
import { AppliedSequence } from '../../../lib/state/applied-sequence.js';
import { neededReader, readable, RecordFormatError, RECORD_FORMATS } from '../../../lib/state/record-format.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

// docs/operations.md "Upgrading": a record says the oldest reader it needs; absent, format 1.

test('a record without a slot is format 1; one that only adds fields keeps its oldest reader, and is read', (t) => {
  t.is(neededReader({ a: 1 }), 1);
  t.is(neededReader('a scalar'), 1);
  t.is(neededReader({ format: 2, oldestReader: 1 }), 1);
  t.is(neededReader({ format: 2 }), 2, 'a format that says nothing of its readers needs its own');
  const added = { format: RECORD_FORMATS.vaultSecret + 1, oldestReader: RECORD_FORMATS.vaultSecret, later: 'a field this release does not know' };
  t.is(readable('vaultSecret', added, 'here'), added);
});

test('hostile: a record needing a later reader, or a slot that is not a format, is refused by name', (t) => {
  const later = RECORD_FORMATS.upload + 1;
  const err = t.throws(() => readable('upload', { format: later, oldestReader: later }, 'the uploads database'), { instanceOf: RecordFormatError });
  t.is(err?.reason, ErrorReasons.RECORD_FORMAT);
  t.regex(err!.message, new RegExp(`^the uploads database: a stored upload record needs a reader of format ${later} or later, this release reads format ${RECORD_FORMATS.upload}`));
  for (const slot of [{ oldestReader: 'x' }, { oldestReader: 0 }, { format: 1.5 }, { oldestReader: -1 }]) {
    t.throws(() => readable('upload', slot, 'here'), { instanceOf: RecordFormatError }, JSON.stringify(slot));
  }
});

test('LMDB: every read of a vault database checks the format (get, a range, a write\'s own read); a readable one keeps its unknown fields', async (t) => {
  const dir = tempDir('pier-format-');
  t.teardown(() => cleanup(dir));
  const scope = scopeKey('alice', 'ws', 'dev');
  const later = RECORD_FORMATS.vaultSecret + 1;
  // Written as a later release would, through a handle of its own.
  const raw = open({ path: dir, compression: false });
  const secrets = raw.openDB<Record<string, unknown>, string>({ name: 'secrets' });
  await secrets.put(secretKey(scope, 'NEW'), { sealed: Buffer.alloc(4), version: 1, history: [], format: later, oldestReader: later });
  await secrets.put(secretKey(scope, 'ADDED'), { sealed: Buffer.alloc(4), version: 1, history: [], format: later, oldestReader: 1, size: 4 });
  await raw.close();
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  t.throws(() => store.secret(secretKey(scope, 'NEW')), { instanceOf: RecordFormatError, message: /the secrets database: a stored vaultSecret record needs a reader of format/ });
  t.throws(() => store.listScope(scope), { instanceOf: RecordFormatError });
  await t.throwsAsync(store.write((w) => w.secret(secretKey(scope, 'NEW'))), { instanceOf: RecordFormatError });
  t.is((store.secret(secretKey(scope, 'ADDED')) as unknown as { size: number }).size, 4);
});

test('a copy stopped at a record it cannot read refuses who waits past it, now and later, with the reason (not a timeout)', async (t) => {
  const seq = new AppliedSequence('the test log');
  seq.set(3);
  const waiting = seq.reached(5, 60_000);
  const why = new RecordFormatError('registry', 9, 'the test log at 4');
  seq.stop(why);
  t.is(await t.throwsAsync(waiting), why);
  t.is(await t.throwsAsync(seq.reached(4, 60_000)), why);
  await t.notThrowsAsync(seq.reached(3), 'what was applied stays read');
});

test('a size is believed only for the version it names: a release before sizes that updates a record keeps the old field, and it is not shown', (t) => {
  const base = { sealed: new Uint8Array(), createdAt: '', createdBy: 'a', updatedAt: '', updatedBy: 'a', history: [] };
  t.is(sizeOf({ ...base, version: 3, size: { version: 3, bytes: 12 } }), 12);
  t.is(sizeOf({ ...base, version: 4, size: { version: 3, bytes: 12 } }), undefined, 'written by 0.2.0 after a rollback: version 4, size of 3');
  t.is(sizeOf({ ...base, version: 1 }), undefined);
});

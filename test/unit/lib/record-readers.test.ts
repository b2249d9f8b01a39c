import test from 'ava';
import { encode } from '../../../bus/codec.js';
import { ErrorReasons } from '../../../bus/errors.js';
import { readBatch, readRecord, readRecordIfOurs, RecordFormatError, recordBytes, RECORD_FORMATS, type RecordKind } from '../../../lib/state/record-format.js';

// docs/operations.md "Upgrading": records kept on streams are read through lib/state/record-format.ts,
// which checks their format. A kind that had no format before is format 1 as it was written: the
// bytes below are what 0.3.0 writes and reads (msgpack through bus/codec.ts), and stay so.

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** Each kind written through recordBytes, one record as 0.3.0 writes it, and its bytes. */
const WRITTEN: Array<{ kind: RecordKind; record: unknown; bytes: string }> = [
  { kind: 'bucketEntry', record: { e: 3, v: { sealed: Buffer.from([1, 2]), version: 1 } }, bytes: 'de0002a16503a176de0002a67365616c6564c4020102a776657273696f6e01' },
  { kind: 'bucketEntry', record: { e: 7, d: true }, bytes: 'de0002a16507a164c3' },
  { kind: 'sharedFailure', record: { limiter: 'key', key: 'ak_1 10.0.0.1', at: 1700000000000, origin: 'r1' }, bytes: 'de0004a76c696d69746572a36b6579a36b6579ad616b5f312031302e302e302e31a26174cb4278bcfe56800000a66f726967696ea27231' },
  { kind: 'snapshot', record: { seq: 10, revision: 10, parts: [4, 5] }, bytes: 'de0003a37365710aa87265766973696f6e0aa57061727473920405' },
  { kind: 'registry', record: { expected: 2, changes: [{ op: 'put' }], origin: 'o' }, bytes: 'de0003a8657870656374656402a76368616e67657391de0001a26f70a3707574a66f726967696ea16f' },
];

test('the bytes written do not change: each kind is written as the bus encodes it, as 0.3.0 does', (t) => {
  for (const { kind, record, bytes } of WRITTEN) {
    t.is(hex(recordBytes(kind, record)), bytes, kind);
    t.is(hex(recordBytes(kind, record)), hex(encode(record)), kind);
  }
});

test('an old record reads: format 1 of every kind is the layout written before the kind had a format', (t) => {
  for (const { kind, record, bytes } of WRITTEN) {
    t.deepEqual(readRecord(kind, Buffer.from(bytes, 'hex'), 'here'), record, kind);
    t.deepEqual(readRecordIfOurs(kind, Buffer.from(bytes, 'hex'), 'here'), record, kind);
  }
  t.is(RECORD_FORMATS.bucketEntry, 1);
  t.is(RECORD_FORMATS.sharedFailure, 1);
});

test('hostile: a record of an unknown newer format is refused by name, by every reader', (t) => {
  for (const kind of ['bucketEntry', 'sharedFailure', 'snapshot', 'audit', 'registry', 'upload'] as const) {
    const later = RECORD_FORMATS[kind] + 1;
    const bytes = encode({ e: 1, format: later, oldestReader: later });
    const where = `the ${kind} stream at 9`;
    const message = new RegExp(`^the ${kind} stream at 9: a stored ${kind} record needs a reader of format ${later} or later, this release reads format ${RECORD_FORMATS[kind]}`);
    const err = t.throws(() => readRecord(kind, bytes, where), { instanceOf: RecordFormatError, message }, kind);
    t.is(err?.reason, ErrorReasons.RECORD_FORMAT);
    t.throws(() => readRecordIfOurs(kind, bytes, where), { instanceOf: RecordFormatError, message }, kind);
    t.throws(() => readBatch(kind, bytes, where), { instanceOf: RecordFormatError, message }, kind);
  }
  // A newer format that only adds fields keeps its oldest reader: read, its new fields kept.
  const added = { e: 2, d: true, format: 2, oldestReader: 1, later: 'x' };
  t.deepEqual(readRecord('bucketEntry', encode(added), 'here'), added);
});

test('bytes that are not a record: not ours for the readers of shared streams, an error for a record that must be one', (t) => {
  const garbage = Buffer.from([0xde, 0x00, 0x05]); // a map of five entries, cut short
  t.is(readRecordIfOurs('sharedFailure', garbage, 'here'), undefined);
  t.deepEqual(readBatch('audit', garbage, 'here'), []);
  t.throws(() => readRecord('snapshot', garbage, 'here'));
});

test('an audit message: a batch, or one entry as written before batches; each entry checked, what is not one left out', (t) => {
  const entry = { at: '2026-11-28T00:00:00.000Z', user: 'alice', op: 'get' };
  t.deepEqual(readBatch('audit', recordBytes('audit', [entry, entry]), 'here'), [entry, entry]);
  t.deepEqual(readBatch('audit', recordBytes('audit', entry), 'here'), [entry]);
  t.deepEqual(readBatch('audit', recordBytes('audit', [entry, 7, null]), 'here'), [entry]);
  const later = RECORD_FORMATS.audit + 1;
  t.throws(() => readBatch('audit', recordBytes('audit', [entry, { ...entry, oldestReader: later }]), 'the vault audit stream at 3'), {
    instanceOf: RecordFormatError,
    message: /^the vault audit stream at 3: a stored audit record needs a reader/,
  });
});

import test from 'ava';
import type { JetStreamManager, JsMsg, KV } from 'nats';
import { BucketView } from '../../../actors/vault/bucket-view.js';
import { encode } from '../../../bus/codec.js';
import { RecordFormatError, recordBytes } from '../../../lib/state/record-format.js';

// actors/vault/bucket-view.ts reads its entries through lib/state/record-format.ts (kind bucketEntry, format 1:
// `{e, v?, d?}` as written since buckets were). One of a later format stops the view, as a log stops (docs/operations.md "Upgrading").

const view = () => new BucketView<{ x: number }>({} as KV, 'b', {} as JetStreamManager, 'vaultSecret');
const entry = (seq: number, key: string, data: Uint8Array) => ({ seq, subject: `$KV.b.${Buffer.from(key).toString('base64url')}`, data, headers: undefined }) as unknown as JsMsg;
const apply = (v: BucketView<{ x: number }>, m: JsMsg) => (v as unknown as { apply(m: JsMsg): void }).apply(m);

test('entries as 0.3.0 writes them are judged as before; bytes that are not an entry are never accepted', async (t) => {
  const v = view();
  apply(v, entry(1, 'k', recordBytes('bucketEntry', { e: 0, v: { x: 1 } })));
  apply(v, entry(2, 'k', Buffer.from([0xde, 0x00, 0x05])));
  apply(v, entry(3, 'k', recordBytes('bucketEntry', { e: 0, v: { x: 9 } })));
  t.is(v.revisionOf('k'), 1, 'the later entry named a revision gone: refused');
  t.deepEqual(v.entries.get('k')?.value, { x: 1 });
  await t.notThrowsAsync(v.applied.reached(3));
});

test('hostile: an entry of a later format stops the view there, and who waits past it is told why by name', async (t) => {
  const v = view();
  apply(v, entry(1, 'k', recordBytes('bucketEntry', { e: 0, v: { x: 1 } })));
  apply(v, entry(2, 'k', encode({ e: 1, v: { x: 2 }, format: 2, oldestReader: 2 })));
  apply(v, entry(3, 'k', recordBytes('bucketEntry', { e: 1, d: true })));
  t.is(v.revisionOf('k'), 1, 'nothing after it is judged');
  await t.throwsAsync(v.applied.reached(2, 60_000), { instanceOf: RecordFormatError, message: /^KV_b at 2: a stored bucketEntry record needs a reader of format 2 or later/ });
  await t.notThrowsAsync(v.applied.reached(1), 'what was applied stays read');
});

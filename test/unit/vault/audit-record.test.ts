import test from 'ava';
import { open } from 'lmdb';
import type { AuditEntry } from '../../../bus/subjects.js';
import { LmdbAudit } from '../../../actors/vault/audit-lmdb.js';
import { AuditRecords } from '../../../actors/vault/audit-record.js';
import { openRecords } from '../../../lib/state/record-format.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

const usual = (over: Partial<AuditEntry> = {}): AuditEntry => ({ at: '2026-11-28T13:26:02.873Z', user: 'alice', app: 'chat', op: 'RetrieveSecret', workspace: 'chat', env: 'prod', name: 'read-me', outcome: 'ok', ...over });

/** The vault's audit database as store-lmdb.ts opens it, and its encoder (lmdb-js's own msgpackr). */
function auditDb() {
  const dir = tempDir('pier-audit-record-');
  const root = open({ path: dir, compression: false });
  const db = openRecords<AuditEntry, [number, string, number]>(root, 'audit', 'audit');
  const encoder = (db as unknown as { encoder: { encode(v: unknown): Uint8Array } }).encoder;
  return { root, db, msgpackr: (e: unknown) => Buffer.from(encoder.encode(e)), close: async () => (await root.close(), cleanup(dir)) };
}

const sizes = [0, 1, 31, 32, 255, 256, 300, 65_535, 65_536];

test('an entry of the usual shape is made byte for byte as msgpackr makes it: nulls, and every size of string header', async (t) => {
  const { msgpackr, close } = auditDb();
  const entries: AuditEntry[] = [
    usual(),
    usual({ user: null, app: null, env: null, name: null, outcome: 'UNAUTHORIZED' }),
    ...sizes.map((n) => usual({ name: 'n'.repeat(n) })),
    ...sizes.map((n) => usual({ workspace: 'w'.repeat(n), outcome: '\u007f'.repeat(n % 7) })),
    usual({ name: '\u0000 control \u001f' }),
  ];
  const records = new AuditRecords();
  for (const e of entries) {
    const mine = new AuditRecords().of(e);
    t.truthy(mine, `made here: ${JSON.stringify(e).slice(0, 80)}`);
    t.deepEqual(mine, msgpackr(e), `the same bytes: ${JSON.stringify(e).slice(0, 80)}`);
    t.deepEqual(records.of(e), mine, 'the same after another entry');
    t.deepEqual(records.of(e), mine, 'the same again');
    const later = { ...e, at: '2026-11-28T13:26:02.874Z' };
    t.deepEqual(records.of(later), msgpackr(later), 'another time, the rest the same');
  }
  await close();
});

test('anything else is left to msgpackr: characters past ASCII, another order, a key more or less, a value not a string or null', (t) => {
  const others: unknown[] = [
    usual({ name: 'café' }),
    usual({ name: '\ud83d\udd11' }),
    usual({ name: '\ud800' }),
    usual({ workspace: `${'w'.repeat(40)}é` }),
    { user: 'alice', at: '2026-11-28T13:26:02.873Z', app: 'chat', op: 'RetrieveSecret', workspace: 'chat', env: 'prod', name: 'read-me', outcome: 'ok' },
    { ...usual(), extra: 1 },
    (({ name: _n, ...rest }) => rest)(usual()),
    usual({ name: undefined as unknown as string }),
    usual({ env: 7 as unknown as string }),
  ];
  const records = new AuditRecords();
  for (const e of others) {
    t.is(new AuditRecords().of(e as AuditEntry), undefined, JSON.stringify(e));
    // Right after the usual entry, whose fields most of these share.
    t.truthy(records.of(usual()));
    t.is(records.of(e as AuditEntry), undefined, JSON.stringify(e));
  }
  const kept = usual();
  records.of(kept);
  t.is(records.of({ ...kept, at: 'caf\u00e9' }), undefined, 'a time past ASCII, the rest the same');
});

test('LmdbAudit stores what msgpackr would have, whichever encoded it (and whenever: at once, or prepared beforehand), and reads it back', async (t) => {
  const { root, db, msgpackr, close } = auditDb();
  const audit = new LmdbAudit(root, db, 'r1');
  const entries = [usual(), usual({ name: 'café', at: '2026-11-28T13:26:02.874Z' }), { ...usual(), extra: 'x' } as AuditEntry, usual({ user: null, app: null, outcome: 'NOT_FOUND' })];
  await audit.append(entries.slice(0, 1));
  await audit.append(entries.slice(1, 2), entries.slice(1, 2).map((e) => audit.prepare(e)));
  await root.transaction(() => entries.slice(2).forEach((e) => audit.put(e)));
  const stored = [...db.getRange()];
  t.deepEqual(stored.map(({ key }) => key), [
    [Date.parse('2026-11-28T13:26:02.873Z'), 'r1', 0],
    [Date.parse('2026-11-28T13:26:02.873Z'), 'r1', 2],
    [Date.parse('2026-11-28T13:26:02.873Z'), 'r1', 3],
    [Date.parse('2026-11-28T13:26:02.874Z'), 'r1', 1],
  ]);
  const order = [0, 2, 3, 1];
  for (let i = 0; i < stored.length; i++) {
    t.deepEqual(stored[i].value, entries[order[i]]);
    t.deepEqual(db.getBinary(stored[i].key), msgpackr(entries[order[i]]));
  }
  t.deepEqual((await audit.read({ limit: 10 })).entries, order.map((i) => entries[i]).reverse());
  await close();
});

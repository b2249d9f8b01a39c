import type { TestFn } from 'ava';
import { PierError } from '../../bus/errors.js';
import type { AuditEntry } from '../../bus/subjects.js';
import { scopeKey, secretKey, type SecretRecord, type VaultStore } from '../../actors/vault/store.js';
import { until } from '../helpers/wait.js';

/** Two replicas of the vault's store on one backend (LMDB on one host, or JetStream anywhere). */
export interface StorePair {
  a: VaultStore;
  b: VaultStore;
  close(): Promise<void>;
  /**
   * What separates a replica's answer from another replica's read beyond sync(): nothing on
   * JetStream; on LMDB, one timer turn (lmdb-js renews its read snapshot then: the other
   * "replica" here is another handle in this process, as another process would be).
   */
  turn?: () => Promise<void>;
}

const record = (value: string, version = 1): SecretRecord => ({ sealed: Buffer.from(value), version, createdAt: 't', createdBy: 'chat', updatedAt: 't', updatedBy: 'chat', history: [] });
const audit = (user: string, name: string, at: number): AuditEntry => ({ at: new Date(at).toISOString(), user, app: 'chat', op: 'CreateSecret', workspace: 'w', env: 'prod', name, outcome: 'ok' });

/** Create-if-absent, as CreateSecret does it. */
const create = (s: VaultStore, key: string, value: string) =>
  s.write((w) => {
    if (w.secret(key)) throw new PierError('CONFLICT', 'exists');
    w.putSecret(key, record(value));
    return value;
  });

/** Check-and-set on the version, as UpdateSecret does it. */
const update = (s: VaultStore, key: string, from: number, value: string) =>
  s.write((w) => {
    const current = w.secret(key);
    if (!current || current.version !== from) throw new PierError('CONFLICT', `at ${current?.version}`);
    w.putSecret(key, record(value, from + 1));
    return from + 1;
  });

/**
 * What every vault store must hold (docs/operations.md "How writes stay correct"), whatever keeps it: a replica reads its
 * own acknowledged writes at once and the other's soon; contended creates and check-and-set give
 * exactly one winner; deletes, scopes and the audit behave the same.
 */
export function vaultStoreSuite(test: TestFn, open: () => Promise<StorePair>): void {
  let pair: StorePair;
  test.before(async () => {
    pair = await open();
  });
  test.after.always(async () => {
    await pair?.close();
  });
  const scope = (ws: string) => scopeKey('alice', ws, 'prod');

  test.serial('a write is read back at once by its replica, and soon by the other', async (t) => {
    const key = secretKey(scope('w1'), 'k');
    await pair.a.write((w) => {
      w.putDataKey(scope('w1'), { wrapped: Buffer.from('dk'), createdAt: 't' });
      w.putSecret(key, record('v1'));
    });
    t.is(Buffer.from(pair.a.secret(key)!.sealed).toString(), 'v1', 'read your own write');
    await until('the other replica to see the write', () => pair.b.secret(key) && pair.b.dataKey(scope('w1')));
    t.deepEqual(pair.b.scopesOf('alice', 'w1'), [scope('w1')]);
  });

  test.serial('a write answered by one replica is read by the other right after its sync(), each time', async (t) => {
    for (let i = 0; i < 20; i++) {
      const key = secretKey(scope('w-ryw'), `k${i}`);
      await pair.a.write((w) => w.putSecret(key, record(`v${i}`)));
      await pair.b.sync();
      await pair.turn?.();
      t.is(Buffer.from(pair.b.secret(key)?.sealed ?? []).toString(), `v${i}`, `write ${i}`);
    }
  });

  test.serial('20 concurrent creates of one name over two replicas: exactly one winner', async (t) => {
    const key = secretKey(scope('w2'), 'contended');
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => create(i % 2 ? pair.a : pair.b, key, `v${i}`)));
    const won = results.filter((r) => r.status === 'fulfilled');
    t.is(won.length, 1);
    t.true(results.every((r) => r.status === 'fulfilled' || (r.reason as PierError).code === 'CONFLICT'));
    const winner = (won[0] as PromiseFulfilledResult<string>).value;
    await until('both replicas to agree on the winner', () => Buffer.from(pair.b.secret(key)?.sealed ?? []).toString() === winner && Buffer.from(pair.a.secret(key)?.sealed ?? []).toString() === winner);
    t.pass();
  });

  test.serial('check-and-set from two replicas: one winner per version, no lost update', async (t) => {
    const key = secretKey(scope('w3'), 'cas');
    await create(pair.a, key, 'v1');
    await until('the other replica to see version 1', () => pair.b.secret(key)?.version === 1);
    const results = await Promise.allSettled([update(pair.a, key, 1, 'from-a'), update(pair.b, key, 1, 'from-b')]);
    t.is(results.filter((r) => r.status === 'fulfilled').length, 1);
    await until('both at version 2', () => pair.a.secret(key)?.version === 2 && pair.b.secret(key)?.version === 2);
    t.is(await update(pair.b, key, 2, 'next'), 3, 'the loser can go on from the new version');
  });

  test.serial('deletes and scopes: a removed secret is gone for both; listScope is sorted', async (t) => {
    const s = scope('w4');
    await pair.a.write((w) => {
      for (const name of ['b', 'a', 'c']) w.putSecret(secretKey(s, name), record(name));
    });
    await pair.b.write((w) => w.removeSecret(secretKey(s, 'b')));
    await until('both to see the delete', () => pair.a.listScope(s).length === 2 && pair.b.listScope(s).length === 2);
    t.deepEqual(pair.a.listScope(s).map((e) => e.key), [secretKey(s, 'a'), secretKey(s, 'c')]);
    t.is(pair.a.secret(secretKey(s, 'b')), undefined);
    // A create after a delete works (the name is free again).
    t.is(await create(pair.a, secretKey(s, 'b'), 'again'), 'again');
  });

  test.serial('audit entries from both replicas are read back newest first, by user', async (t) => {
    const base = Date.now();
    await pair.a.appendAudit([audit('alice', 'one', base), audit('bob', 'two', base + 1)]);
    await pair.b.write((w) => w.appendAudit(audit('alice', 'three', base + 2)));
    const read = await until('the three entries in the audit', async () => {
      const r = (await pair.a.readAudit({ limit: 10, user: 'alice' })).entries;
      return r.filter((e) => ['one', 'three'].includes(e.name!)).length === 2 ? r : undefined;
    });
    t.deepEqual(read.filter((e) => ['one', 'three'].includes(e.name!)).map((e) => e.name), ['three', 'one']);
    t.true((await pair.b.readAudit({ limit: 10 })).entries.some((e) => e.user === 'bob'));
  });

  test.serial('an audit search by app and op finds matches past the newest entries, and stops at its bound saying so', async (t) => {
    const base = Date.now() + 10_000;
    const older = Array.from({ length: 4 }, (_, i) => ({ ...audit('carol', `match-${i}`, base + i), app: 'notes', op: 'RetrieveSecret' }));
    const newer = Array.from({ length: 300 }, (_, i) => audit('carol', `noise-${i}`, base + 10 + i));
    await pair.a.appendAudit([...older, ...newer]);
    const found = await until('the four matches behind 300 newer entries', async () => {
      const page = await pair.b.readAudit({ user: 'carol', app: 'notes', op: 'RetrieveSecret', limit: 3 });
      return page.entries.length === 3 ? page : undefined;
    });
    t.deepEqual(found.entries.map((e) => e.name), ['match-3', 'match-2', 'match-1'], 'newest first, past the newest 300');
    t.true(found.complete);
    // A search bounded at 100 entries: nothing found, and it says where it stopped.
    const cut = await pair.b.readAudit({ user: 'carol', app: 'notes', limit: 3 }, 100);
    t.false(cut.complete);
    t.is(cut.scanned, 100);
    t.deepEqual(cut.entries, []);
    t.is(typeof cut.searchedBackTo, 'string');
  });
}

import test from 'ava';
import type { JetStreamManager, JsMsg, KV } from 'nats';
import { BucketView, Conflict } from '../../../actors/vault/bucket-view.js';
import type { Op } from '../../../actors/vault/buffered-writer.js';
import { scopeKey, secretFormatOf, secretKey } from '../../../actors/vault/store.js';
import { JetStreamVaultStore } from '../../../actors/vault/store-jetstream.js';
import { VersionUsage } from '../../../actors/vault/version-usage.js';
import { keepVersion, nextRecord } from '../../../actors/vault/versions.js';
import { destroy, softDelete, undelete } from '../../../actors/vault/versions-deleted.js';
import { commitWaves, oneChangePerKey, putBack } from '../../../actors/vault/write-attempt.js';
import { KEY_ID_BYTES, sealKeyed } from '../../../lib/crypto/secret-box.js';
import type { RecordKind } from '../../../lib/state/record-format.js';

// A write on the JetStream store commits key by key (actors/vault/write-attempt.ts): an attempt
// that loses puts back what it committed, and a key changed twice in one write is committed once.

const scope = scopeKey('alice', 'chat', 'prod');
const key = secretKey(scope, 'motto');
const at = () => new Date(0).toISOString();
const BOUNDS = { perSecret: 10, scopeBytes: 1e9, appBytes: 1e9, deletedForMs: 1e9, scrubAfterMs: 60_000 };
const box = (n: number) => Uint8Array.from([1, n, ...new Array<number>(40).fill(n)]);

/** A seeded generator (mulberry32): an interleaving that breaks the test can be run again. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Two replicas' real bucket views over one stream per bucket, fed in the stream's order as nats
 * would; each put of a racing write first yields a random number of turns, so the two writes'
 * commits interleave differently with each seed.
 */
function twoReplicas(random: () => number) {
  const racing = { on: false };
  const turn = () => new Promise((r) => setImmediate(r));
  const bucket = <T>(name: string, kind: RecordKind, usages: Array<VersionUsage | undefined>) => {
    const log: Array<{ seq: number; subject: string; data: Uint8Array }> = [];
    const manager = {
      streams: {
        info: async () => ({ state: { messages: log.length, last_seq: log.at(-1)?.seq ?? 0 } }),
        getMessage: async (_s: string, q: { seq: number; next_by_subj: string }) => {
          const m = log.find((x) => x.seq >= q.seq && x.subject === q.next_by_subj);
          if (!m) throw Object.assign(new Error('no message'), { api_error: { code: 404, err_code: 10037 } });
          return { ...m, time: new Date(0) };
        },
        deleteMessage: async (_s: string, seq: number) => void log.splice(log.findIndex((x) => x.seq === seq), 1),
      },
    } as unknown as JetStreamManager;
    const views: Array<BucketView<T>> = [];
    const kv = {
      put: async (k: string, data: Uint8Array) => {
        if (racing.on) for (let n = Math.floor(random() * 4); n > 0; n--) await turn();
        const m = { seq: (log.at(-1)?.seq ?? 0) + 1, subject: `$KV.${name}.${k}`, data };
        log.push(m);
        for (const v of views) (v as unknown as { apply(m: JsMsg): void }).apply({ ...m, headers: undefined } as unknown as JsMsg);
        return m.seq;
      },
    } as unknown as KV;
    for (const u of usages) views.push(new BucketView<T>(kv, name, manager, kind, u ? (k, b, a) => u.changed(k, b as never, a as never) : undefined));
    return { views, manager };
  };
  const usage = [new VersionUsage(), new VersionUsage()];
  const b = {
    keys: bucket('keys', 'vaultDataKey', [undefined, undefined]),
    secrets: bucket('secrets', 'vaultSecret', [undefined, undefined]),
    versions: bucket('versions', 'vaultVersion', usage),
    deleted: bucket('deleted', 'vaultDeleted', [undefined, undefined]),
    valueKeys: bucket('valueKeys', 'vaultValueKey', [undefined, undefined]),
  };
  const Store = JetStreamVaultStore as unknown as new (...args: unknown[]) => JetStreamVaultStore;
  const putBackFailed: unknown[] = [];
  const replica = (i: 0 | 1) =>
    new Store(b.keys.manager, { keys: b.keys.views[i], secrets: b.secrets.views[i], versions: b.versions.views[i], deleted: b.deleted.views[i], valueKeys: b.valueKeys.views[i], usage: usage[i] }, { append: async () => undefined }, () => undefined, undefined, () => 0, () => undefined, (e: unknown) => putBackFailed.push(e));
  return { a: replica(0), b: replica(1), racing, putBackFailed };
}

const outcome = (p: Promise<unknown>) => p.then((r) => `ok ${JSON.stringify(r)}`, (e: { code?: string }) => String(e.code));

test('an operator destroy and an undelete of the same deleted secret end as one of them then the other, whatever the interleaving (JetStream, two replicas)', async (t) => {
  const seen = new Set<string>();
  for (let seed = 1; seed <= 40; seed++) {
    const { a, b, racing, putBackFailed } = twoReplicas(seeded(seed));
    // v1, v2, then deleted (acknowledged): versions 1 and 2 kept, the deleted record at 2.
    await a.write((w) => w.putSecret(key, { ...secretFormatOf(box(1)), gen: 'g1', sealed: box(1), version: 1, createdAt: at(), createdBy: 'app', updatedAt: at(), updatedBy: 'app', history: [] }));
    await a.write((w) => {
      const e = w.secret(key)!;
      keepVersion(w, BOUNDS, key, e, 'app');
      w.putSecret(key, nextRecord(e, box(2), 'app', at()));
    });
    await a.write((w) => softDelete(w, BOUNDS, key, w.secret(key)!, 'app', at()));
    racing.on = true;
    const [undeleted, destroyed] = await Promise.all([outcome(b.write((w) => undelete(w, key).version)), outcome(a.write((w) => destroy(w, key, undefined)))]);
    racing.on = false;
    const live = a.secret(key);
    const state = { live: live?.version ?? null, deleted: a.deleted(key)?.version ?? null, versions: a.everything().versions.length };
    t.deepEqual(state, { live: b.secret(key)?.version ?? null, deleted: b.deleted(key)?.version ?? null, versions: b.everything().versions.length }, `seed ${seed}: both replicas see the same`);
    t.deepEqual(putBackFailed, [], `seed ${seed}`);
    if (undeleted === 'ok 2') {
      // Undelete first: the secret live at 2, version 1 kept; the destroy then finds nothing deleted.
      t.is(destroyed, 'CONFLICT', `seed ${seed}`);
      t.deepEqual(state, { live: 2, deleted: null, versions: 1 }, `seed ${seed}`);
    } else {
      // Destroy first: everything of the generation gone; the undelete finds nothing (or nothing kept) to bring back.
      t.is(destroyed, 'ok [1,2]', `seed ${seed}: undelete answered ${undeleted}`);
      t.is(undeleted, 'NOT_FOUND', `seed ${seed}`);
      t.deepEqual(state, { live: null, deleted: null, versions: 0 }, `seed ${seed}`);
    }
    seen.add(undeleted === 'ok 2' ? 'undelete first' : 'destroy first');
  }
  t.deepEqual([...seen].sort(), ['destroy first', 'undelete first'], 'the seeds raced both ways');
});

test('a key changed twice in one write is committed once, where its last change was made, naming the revision its first change read', (t) => {
  const view = {} as BucketView<unknown>;
  const other = {} as BucketView<unknown>;
  const op = (v: BucketView<unknown>, k: string, value: unknown, expected: number): Op => ({ view: v, key: k, value, expected, before: () => undefined });
  const first = op(view, 'd', undefined, 7);
  const ops = [op(other, 'v1', undefined, 3), first, op(other, 'v2', 'x', 0), { ...first, value: 'new' }];
  t.deepEqual(
    oneChangePerKey(ops).map((o) => [o.key, o.value, o.expected]),
    [
      ['v1', undefined, 3],
      ['v2', 'x', 0],
      ['d', 'new', 7],
    ],
  );
  t.deepEqual(oneChangePerKey([op(view, 'd', 'a', 1), op(other, 'd', 'b', 2)]).length, 2, 'the same name in two buckets is two keys');
});

test('hostile: a change that cannot be put back (another writer changed the key since) is answered 503 and reported, never as done', async (t) => {
  const puts: Array<[string, unknown, number]> = [];
  const view = {
    commit: async (k: string, value: unknown, expected: number) => {
      puts.push([k, value, expected]);
      if (k === 'taken') throw new Conflict();
      return 100 + puts.length;
    },
  } as unknown as BucketView<unknown>;
  const failed: string[] = [];
  const committed = [
    { op: { view, key: 'first', value: 'new', expected: 1, before: () => 'old' }, seq: 10 },
    { op: { view, key: 'taken', value: undefined, expected: 2, before: () => 'kept' }, seq: 11 },
    { op: { view, key: 'absent', value: undefined, expected: 0, before: () => undefined }, seq: 0 },
  ];
  await t.throwsAsync(putBack(committed, () => false, (_e, c) => failed.push(c.op.key)), { code: 'UNAVAILABLE', message: /changed it while this one was undone/ });
  t.deepEqual(failed, ['taken']);
  // Newest first; the change that committed nothing (seq 0) has nothing to put back; the failure stops the rest.
  t.deepEqual(puts, [['taken', 'kept', 11]]);
  puts.length = 0;
  await putBack(committed.filter((c) => c.op.key !== 'taken'), () => false, () => t.fail());
  t.deepEqual(puts, [['first', 'old', 10]]);
});

test('commit waves: an update keeps its old value and puts its new value key at once, then moves the secret; nothing goes before what it is sealed under', (t) => {
  const view = (name: string) => ({ name }) as unknown as BucketView<unknown>;
  const [keys, versions, valueKeys, secrets, deleted] = ['keys', 'versions', 'valueKeys', 'secrets', 'deleted'].map(view) as [BucketView<unknown>, BucketView<unknown>, BucketView<unknown>, BucketView<unknown>, BucketView<unknown>];
  const together = { versions, valueKeys };
  const id = (n: number) => Buffer.alloc(KEY_ID_BYTES, n);
  const under = (n: number) => ({ sealed: sealKeyed(Buffer.alloc(32, 7), id(n), Buffer.from('v'), 'c') });
  const op = (v: BucketView<unknown>, k: string, value: unknown): Op => ({ view: v, key: k, value, expected: 0, before: () => undefined });
  const names = (waves: Op[][]) => waves.map((w) => w.map((o) => `${(o.view as unknown as { name: string }).name}:${o.key}`));

  // An update: the old value (under key 1) kept as a version, the new value's key 2, the secret under key 2.
  const update = [op(versions, 's/1', under(1)), op(valueKeys, id(2).toString('hex'), { wrapped: 1 }), op(secrets, 's', under(2))];
  t.deepEqual(names(commitWaves(update, together)), [['versions:s/1', `valueKeys:${id(2).toString('hex')}`], ['secrets:s']]);

  // A create with a first data key: the data key alone first, then the value key, then the secret.
  const create = [op(keys, 'scope', { k: 1 }), op(valueKeys, id(3).toString('hex'), { wrapped: 1 }), op(secrets, 's', under(3))];
  t.deepEqual(names(commitWaves(create, together)), [['keys:scope'], [`valueKeys:${id(3).toString('hex')}`], ['secrets:s']]);

  // A rekey re-sealing a version under a new value key put in the same write: the key first, the version after it.
  const rekey = [op(valueKeys, id(4).toString('hex'), { wrapped: 1 }), op(versions, 's/1', under(4)), op(versions, 's/2', under(1))];
  t.deepEqual(names(commitWaves(rekey, together)), [[`valueKeys:${id(4).toString('hex')}`], ['versions:s/1', 'versions:s/2']]);

  // An update at its versions bound: its oldest version goes in the first wave, that version's key after the secret moved.
  const atBound = [op(valueKeys, id(5).toString('hex'), { wrapped: 1 }), op(versions, 's/11', under(1)), op(versions, 's/1', undefined), op(secrets, 's', under(5)), op(valueKeys, id(0).toString('hex'), undefined)];
  t.deepEqual(names(commitWaves(atBound, together)), [[`valueKeys:${id(5).toString('hex')}`, 'versions:s/11', 'versions:s/1'], ['secrets:s'], [`valueKeys:${id(0).toString('hex')}`]]);

  // A destroy: the secret alone, its versions at once, then their keys at once (after every record
  // that named them), other buckets alone.
  const destroy = [op(secrets, 's', undefined), op(versions, 's/1', undefined), op(versions, 's/2', undefined), op(valueKeys, id(1).toString('hex'), undefined), op(valueKeys, id(2).toString('hex'), undefined), op(deleted, 's', { at: 1 })];
  t.deepEqual(names(commitWaves(destroy, together)), [['secrets:s'], ['versions:s/1', 'versions:s/2'], [`valueKeys:${id(1).toString('hex')}`, `valueKeys:${id(2).toString('hex')}`], ['deleted:s']]);

  // A key removed is never in a wave with a record that named it, nor a put with a removal of keys.
  const mixed = [op(versions, 's/1', undefined), op(valueKeys, id(1).toString('hex'), undefined), op(valueKeys, id(6).toString('hex'), { wrapped: 1 }), op(versions, 's/3', undefined), op(valueKeys, id(3).toString('hex'), undefined)];
  t.deepEqual(names(commitWaves(mixed, together)), [['versions:s/1'], [`valueKeys:${id(1).toString('hex')}`], [`valueKeys:${id(6).toString('hex')}`, 'versions:s/3'], [`valueKeys:${id(3).toString('hex')}`]]);

  // Every change in exactly one wave, in the write's order.
  for (const ops of [update, create, rekey, atBound, destroy, mixed]) t.deepEqual(commitWaves(ops, together).flat(), ops);
});

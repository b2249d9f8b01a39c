import test from 'ava';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { vaultStoreSuite } from './vault-store-suite.js';
import { PierError } from '../../bus/errors.js';
import { scopeKey, secretKey, type SecretRecord } from '../../actors/vault/store.js';
import { until, within } from '../helpers/wait.js';

// JetStream on one node (R1): two replicas, each with its own connection, no shared disk.
vaultStoreSuite(test, () => jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 })));

// The bucket keeps the last 64 entries of a key: a replica started after more writes than that
// must still find the key as it is (a chaos run found a fresh replica reading it as absent, and
// accepting a create over it).
test('a replica started after a key had more writes than the bucket keeps sees its last value, and refuses a create over it', async (t) => {
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 }));
  t.teardown(() => pair.close());
  const key = secretKey(scopeKey('alice', 'busy', 'prod'), 'k');
  const record = (value: string, version: number): SecretRecord => ({ sealed: Buffer.from(value), version, createdAt: 't', createdBy: 'a', updatedAt: 't', updatedBy: 'a', history: [] });
  await pair.a.write((w) => w.putSecret(key, record('v1', 1)));
  for (let v = 2; v <= 100; v++) {
    // Every fifth round, the other replica races from a stale read too: refused entries take history slots as well.
    const stale = v % 5 === 0 ? pair.b.write((w) => w.putSecret(key, record(`stale${v}`, v))).catch(() => undefined) : Promise.resolve();
    await Promise.all([pair.a.write((w) => w.putSecret(key, record(`v${v}`, v))).catch(() => undefined), stale]);
  }
  await pair.a.sync();
  const last = Buffer.from(pair.a.secret(key)!.sealed).toString();
  const fresh = await pair.another();
  await fresh.sync();
  t.is(Buffer.from(fresh.secret(key)?.sealed ?? []).toString(), last, 'the fresh replica reads the last accepted value');
  await t.throwsAsync(
    fresh.write((w) => {
      if (w.secret(key)) throw new PierError('CONFLICT', 'exists');
      w.putSecret(key, record('over', 1));
    }),
    { message: 'exists' },
  );
  // And a write from the fresh replica lands for everyone.
  await fresh.write((w) => w.putSecret(key, record('after', 101)));
  const seen = await until('the first replica to see the fresh one\'s write', () => Buffer.from(pair.a.secret(key)?.sealed ?? []).toString() === 'after' && pair.a.secret(key));
  t.is(seen.version, 101);
});

// Reads wait for the marks other replicas announce: a view still behind a real one after the wait
// refuses the read (a chaos run found a list answering a value overwritten by an acknowledged update
// while a NATS node restarted); a mark past the end of the stream was never written and is forgotten.
test('a replica behind an announced change refuses reads (503) rather than answer stale; a mark never written is forgotten', async (t) => {
  const marks: Array<{ keys: number; secrets: number }> = [];
  const pair = await jetStreamReplicas(1, (js, manager, replicas) =>
    JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000, announce: (mark) => void marks.push(mark) }),
  );
  t.teardown(() => pair.close());
  const key = secretKey(scopeKey('alice', 'marks', 'prod'), 'k');
  const record = (value: string): SecretRecord => ({ sealed: Buffer.from(value), version: 1, createdAt: 't', createdBy: 'a', updatedAt: 't', updatedBy: 'a', history: [] });
  // b's view of the secrets stops following (its consumer lost with a node, not yet re-attached).
  await (pair.b as unknown as { secretsView: { close(): Promise<void> } }).secretsView.close();
  await pair.a.write((w) => w.putSecret(key, record('new')));
  pair.b.heard(marks.at(-1)!);
  const refused = await t.throwsAsync(pair.b.sync(), { instanceOf: PierError });
  t.is(refused!.code, 'UNAVAILABLE');
  t.is(pair.b.secret(key), undefined, 'its view is indeed behind');
  // A forged mark (past anything the stream holds) costs one wait, then is forgotten.
  const c = await pair.another();
  c.heard({ keys: 0, secrets: 1_000_000_000 });
  await c.sync();
  await c.sync();
  t.is(Buffer.from(c.secret(key)!.sealed).toString(), 'new');
});

// Announcements are core NATS messages: a replica whose connection broke misses those sent while it
// was away. A chaos run found a list answering secrets deleted (and acknowledged) while the
// reader's NATS node restarted. After a connection loss, the next read catches up with the streams
// themselves (or is refused, 503); without one, reads stay local.
test('after its connection was lost, a replica catches up with the streams before it answers, announcement or not', async (t) => {
  let losses = 0;
  const pair = await jetStreamReplicas(1, (js, manager, replicas) =>
    JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000, announce: () => undefined, connectionLosses: () => losses }),
  );
  t.teardown(() => pair.close());
  const key = secretKey(scopeKey('alice', 'away', 'prod'), 'k');
  const record = (value: string): SecretRecord => ({ sealed: Buffer.from(value), version: 1, createdAt: 't', createdBy: 'a', updatedAt: 't', updatedBy: 'a', history: [] });
  // b's view stops following (its consumer lost with the node); the announcement never reaches it.
  await (pair.b as unknown as { secretsView: { close(): Promise<void> } }).secretsView.close();
  await pair.a.write((w) => w.putSecret(key, record('new')));
  await pair.b.sync();
  t.is(pair.b.secret(key), undefined, 'no loss seen, no mark heard: the read stays local (and cannot know)');
  losses++;
  const refused = await t.throwsAsync(pair.b.sync(), { instanceOf: PierError });
  t.is(refused!.code, 'UNAVAILABLE', 'behind the stream after a loss: refused, not answered stale');
  // A replica that is following catches up and answers, and stays local after that.
  const c = await pair.another();
  await c.sync();
  t.is(Buffer.from(c.secret(key)!.sealed).toString(), 'new');
});

// docs/vault.md "Audit": a change's entry is on the nodes' disks before the change is answered (it
// was appended after the answer, unawaited: a power cut, or a kill, between the two lost it).
test('a change is answered only once its audit entry is acknowledged; one that cannot be written is counted, and the change still answered', async (t) => {
  let lost = 0;
  const pair = await jetStreamReplicas(1, (js, manager, replicas) => JetStreamVaultStore.open(js, manager, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000, onAuditLost: (n) => (lost += n) }));
  t.teardown(() => pair.close());
  const key = secretKey(scopeKey('alice', 'audited', 'prod'), 'k');
  const record: SecretRecord = { sealed: Buffer.from('v'), version: 1, createdAt: 't', createdBy: 'a', updatedAt: 't', updatedBy: 'a', history: [] };
  const entry = { at: new Date().toISOString(), user: 'alice', app: 'a', op: 'Create', workspace: 'audited', env: 'prod', name: 'k', outcome: 'ok' } as const;
  // The audit stream held back until the test lets it go: the write must wait for it.
  const audit = (pair.a as unknown as { audit: { append: (e: unknown[]) => Promise<void> } }).audit;
  const append = audit.append.bind(audit);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let appended = false;
  audit.append = async (entries) => {
    await held;
    await append(entries);
    appended = true;
  };
  let answered = false;
  const write = pair.a.write((w) => {
    w.putSecret(key, record);
    w.appendAudit(entry);
  }).then(() => (answered = true));
  await until('the change committed to its bucket', () => pair.a.secret(key));
  await new Promise((r) => setImmediate(r));
  t.false(answered, 'not answered while its audit entry is not written');
  release();
  await write;
  t.true(appended, 'answered after the entry was acknowledged');
  t.true((await pair.a.readAudit({ user: 'alice', limit: 10 })).entries.some((e) => e.workspace === 'audited'));
  // An audit stream that fails: counted as lost, the change (which happened) answered.
  audit.append = async () => {
    throw new Error('no leader');
  };
  await pair.a.write((w) => {
    w.putSecret(secretKey(scopeKey('alice', 'audited', 'prod'), 'k2'), record);
    w.appendAudit({ ...entry, name: 'k2' });
  });
  t.is(lost, 1);
});

// The vault actor asks every other replica to take a write's mark in before the write is answered
// (actors/vault/index.ts announce): a read one of them serves after the answer then waits for its
// view to show the write. A one-way announcement could be overtaken by that read (an upgrade run
// saw a list 220 ms stale on another replica).
test('a write is answered only once its announcement has been taken in', async (t) => {
  let release: (() => void) | null = null;
  const announced: unknown[] = [];
  const pair = await jetStreamReplicas(1, (js, manager, replicas) =>
    JetStreamVaultStore.open(js, manager, {
      replicas,
      auditMaxAgeMs: 86_400_000,
      auditMaxEntries: 10_000,
      announce: (mark) => {
        announced.push(mark);
        return new Promise<void>((resolve) => (release = resolve));
      },
    }),
  );
  t.teardown(() => pair.close());
  const key = secretKey(scopeKey('alice', 'taken-in', 'prod'), 'k');
  let answered = false;
  const writing = pair.a.write((w) => w.putSecret(key, { sealed: Buffer.from('v'), version: 1, createdAt: 't', createdBy: 'a', updatedAt: 't', updatedBy: 'a', history: [] })).then(() => (answered = true));
  await until('the write to be durable and announced', () => announced.length === 1);
  await new Promise((r) => setTimeout(r, 50));
  t.false(answered, 'not answered while the announcement is not taken in');
  release!();
  await within('the write to be answered once its announcement is taken in', writing);
  t.true(answered);
});

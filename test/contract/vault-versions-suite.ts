import type { TestFn } from 'ava';
import { randomBytes } from 'node:crypto';
import { DataKeys } from '../../actors/vault/data-keys.js';
import { Values } from '../../actors/vault/values.js';
import { vaultOp, type VaultDeps } from '../../actors/vault/handler.js';
import { operatorOp } from '../../actors/vault/operator.js';
import { vaultImportBatch, vaultRecords } from '../../actors/vault/state-io.js';
import { rekey } from '../../actors/vault/rekey.js';
import { appAccount, genOf, payerOf, scopeAccount, scopeKey, secretKey, versionKey, type VaultStore } from '../../actors/vault/store.js';
import type { VersionBounds } from '../../actors/vault/versions.js';
import { destroyGeneration } from '../../actors/vault/versions-deleted.js';
import { expiredDeleted, isOrphan, orphanVersions } from '../../actors/vault/versions-read.js';
import type { AppView, AuditEntry, OperatorVaultRequest } from '../../bus/subjects.js';
import { AccessTokens } from '../../lib/crypto/access-token.js';
import { Keyring } from '../../lib/crypto/keyring.js';
import { keyIdOf } from '../../lib/crypto/secret-box.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';

/** One vault store to run the suite on (LMDB or JetStream), and where its bytes are on disk. */
export interface VersionsStore {
  store: VaultStore;
  /** Every file of the store's backend (LMDB environment, JetStream store dir), to read raw. */
  files(): string[];
  /**
   * Whether destroyed sealed bytes are erased from those files (JetStream's streams). LMDB leaves
   * them in freed pages until the pages are reused: there a destroyed value is unreadable only
   * when it was sealed under a value key of its own, which a destroy erases (docs/vault.md "Destroyed").
   */
  erases: boolean;
  /** Another replica of the same store, started now (JetStream): it must read what the first did, erased history and all. */
  another?(): Promise<VaultStore>;
  close(): Promise<void>;
}

const DAY = 86_400_000;
const ALL_OPS = ['CreateSecret', 'RetrieveSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret', 'ListSecretVersions', 'RetrieveSecretVersion', 'RestoreSecretVersion'];
const appOf = (user: string, name: string): AppView => ({ id: `${user}/${name}`, user, name, version: '1', host: 'h', appKey: `ak_${user}_${name}`, installedAt: '', grants: [], websocket: null, upload: null, providers: [] });

/**
 * The vault's handler and operator over `store`, with apps alice/chat, alice/plain (the five ops
 * only) and bob/chat; sealing new values under value keys of their own when `keyed`.
 */
function vaultOn(store: VaultStore, bounds: VersionBounds, clock: { now: number }, keyed: boolean, keyring = new Keyring(randomBytes(32))) {
  /** Whether new values are sealed under value keys (a test may turn it on midway, as the last old replica's stop does). */
  const gate = { keyed };
  const tokens = new AccessTokens(keyring);
  const audited: AuditEntry[] = [];
  const apps = [appOf('alice', 'chat'), appOf('alice', 'plain'), appOf('bob', 'chat')];
  const keys = new DataKeys(store, keyring, () => new Date(clock.now));
  const deps: VaultDeps = {
    store,
    keys,
    values: new Values(store, keys, () => gate.keyed),
    cache: {
      app: (u: string, a: string) => apps.find((x) => x.user === u && x.name === a),
      userExists: (u: string) => u === 'alice' || u === 'bob',
      userForToken: () => undefined,
    } as unknown as RegistryCache,
    tokens,
    vaultGroup: 'secret.vault',
    now: () => clock.now,
    audit: (e) => void audited.push(e),
    anonymous: () => undefined,
    auditInWrite: (w, e) => (audited.push(e), w.appendAudit(e)),
    bounds,
  };
  const token = (app: AppView, ops: string[], workspace: string) => tokens.sign({ app: app.id, key: app.appKey, dataType: 'secret', group: 'secret.vault', version: 'v1', ops: ops.map((o) => `${o}?workspace=${workspace}`), iat: 0, exp: Number.MAX_SAFE_INTEGER });
  const grants = { alice: [apps[0], ALL_OPS], plain: [apps[1], ALL_OPS.slice(0, 5)], bob: [apps[2], ALL_OPS] } as const;
  /** An app's call (on workspace `w` unless named); a refusal answers `CODE: message`. */
  const op = (who: keyof typeof grants, name: string, body: Record<string, unknown>, workspace = 'w') =>
    vaultOp(deps, { op: name, workspace, userToken: '', accessToken: token(grants[who][0], [...grants[who][1]], workspace), body }).then(
      (a) => a,
      (e: { code: string; message: string }) => `${e.code}: ${e.message}`,
    );
  /** The operator's call on alice's workspace `w`. */
  const operator = (req: Omit<OperatorVaultRequest, 'user' | 'workspace'>) =>
    operatorOp(deps, { user: 'alice', workspace: 'w', ...req }).then(
      (a) => a.data as never,
      (e: { code: string; message: string }) => `${e.code}: ${e.message}` as never,
    );
  return { deps, op, operator, audited, gate, keyring };
}

// Earlier records erased whatever their age (the configuration waits 60 s; the suite's clock is not the server's).
const BOUNDS: VersionBounds = { perSecret: 10, scopeBytes: 16 << 20, appBytes: 64 << 20, deletedForMs: 7 * DAY, scrubAfterMs: Number.NEGATIVE_INFINITY };

/**
 * Versions and soft delete (docs/vault.md "Versions") on one store: what every backend must hold,
 * driven through the vault's handler and operator as apps and the CLI reach them.
 */
export function vaultVersionsSuite(test: TestFn, open: () => Promise<VersionsStore>, { keyed = false } = {}): void {
  const setup = async (t: { teardown(fn: () => Promise<void>): void }, bounds: Partial<VersionBounds> = {}) => {
    const s = await open();
    t.teardown(() => s.close());
    const clock = { now: Date.parse('2026-11-27T00:00:00Z') };
    return { ...s, clock, ...vaultOn(s.store, { ...BOUNDS, ...bounds }, clock, keyed) };
  };
  const alice = (name: string) => secretKey(scopeKey('alice', 'w', 'prod'), name);

  test('every update keeps the value it replaces: listed with who, when and size, never a value; restore makes it current again', async (t) => {
    const { op, operator, clock } = await setup(t);
    await op('alice', 'CreateSecret', { name: 'db', value: 'first-value' });
    clock.now += 1000;
    await op('alice', 'UpdateSecret', { name: 'db', value: 'second' });
    await operator({ op: 'set', name: 'db', value: 'third!' });
    const listed = (await operator({ op: 'versions', name: 'db' })) as { versions: Array<{ version: number; by: string; size: number; current: boolean; kept: boolean }> };
    t.deepEqual(
      listed.versions.map((v) => [v.version, v.by, v.size, v.current, v.kept]),
      [
        [3, '(operator)', 6, true, true],
        [2, 'chat', 6, false, true],
        [1, 'chat', 11, false, true],
      ],
    );
    t.false(/first-value|second|third!/.test(JSON.stringify(listed)), 'no value in a listing');
    // The app's own listing (declared op) says the same, still without values.
    const mine = (await op('alice', 'ListSecretVersions', { name: 'db' })) as { data: { versions: unknown[] } };
    t.is(mine.data.versions.length, 3);
    t.false(/first-value|second|third!/.test(JSON.stringify(mine)));
    t.like(await op('alice', 'RetrieveSecretVersion', { name: 'db', version: 1 }), { data: { value: 'first-value', version: 1 }, version: 3 });
    // Restore by the operator: a new version (4) with version 1's value.
    t.like(await operator({ op: 'restore', name: 'db', version: 1 }), { version: 4, restored: 1 });
    t.like(await op('alice', 'RetrieveSecret', { name: 'db' }), { data: { value: 'first-value' }, version: 4 });
    // Check-and-set holds across it: a writer that read version 3 is refused.
    t.regex(String(await op('alice', 'UpdateSecret', { name: 'db', value: 'late', version: 3 })), /^CONFLICT: secret "db" is at version 4, not 3/);
    // Restore by the app (declared op), then the current one cannot be restored or destroyed.
    t.like(await op('alice', 'RestoreSecretVersion', { name: 'db', version: 2 }), { version: 5 });
    t.like(await op('alice', 'RetrieveSecret', { name: 'db' }), { data: { value: 'second' } });
    t.regex(String(await operator({ op: 'restore', name: 'db', version: 5 })), /^CONFLICT: version 5 of "db" is the current one/);
    t.regex(String(await operator({ op: 'destroy', name: 'db', version: 5 })), /^CONFLICT: version 5 of "db" is the current one/);
  });

  test('an app that does not declare the version operations cannot reach them; another user\'s versions are not there', async (t) => {
    const { op } = await setup(t);
    await op('alice', 'CreateSecret', { name: 'db', value: 'v1' });
    await op('alice', 'UpdateSecret', { name: 'db', value: 'v2' });
    for (const o of ['ListSecretVersions', 'RetrieveSecretVersion', 'RestoreSecretVersion']) {
      t.regex(String(await op('plain', o, { name: 'db', version: 1 })), new RegExp(`^FORBIDDEN: ${o}\\?workspace=w is not granted`), o);
    }
    // bob's app, with every op granted, reads bob's scope: alice's secret and versions are not in it.
    t.regex(String(await op('bob', 'ListSecretVersions', { name: 'db' })), /^NOT_FOUND/);
    t.regex(String(await op('bob', 'RetrieveSecretVersion', { name: 'db', version: 1 })), /^NOT_FOUND/);
    t.regex(String(await op('bob', 'RestoreSecretVersion', { name: 'db', version: 1 })), /^NOT_FOUND/);
    // A version number out of range or not a number is a 400 naming the field.
    t.regex(String(await op('alice', 'RetrieveSecretVersion', { name: 'db', version: 'x' })), /^BAD_REQUEST: .*version/);
    t.regex(String(await op('alice', 'RetrieveSecretVersion', { name: 'db', version: 0 })), /^BAD_REQUEST: .*version/);
  });

  test('bounds: per secret by count, per scope and per user by the bytes one app\'s writes keep, its own oldest first; never a refused write', async (t) => {
    const { op, operator, store } = await setup(t, { perSecret: 3, scopeBytes: 4096, appBytes: 6144 });
    for (let i = 1; i <= 8; i++) t.like(await op('alice', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: 'a', value: `a${i}` }), { version: i }, `write ${i} is never refused`);
    const listed = (await operator({ op: 'versions', name: 'a' })) as { versions: Array<{ version: number; kept: boolean }> };
    t.deepEqual(listed.versions.filter((v) => v.kept).map((v) => v.version), [8, 7, 6, 5], 'the current and 3 earlier kept');
    t.deepEqual(listed.versions.filter((v) => !v.kept).map((v) => v.version), [4, 3, 2, 1], 'older ones listed as not kept');
    t.regex(String(await operator({ op: 'restore', name: 'a', version: 2 })), /^NOT_FOUND: version 2 of "a" is not kept \(kept: 5, 6, 7\)/);
    // 1,000-byte values: the app keeps at most 4 KiB of versions in the scope; every write still lands.
    const big = (i: number) => `${i}`.padEnd(1000, 'x');
    for (let s = 0; s < 3; s++) for (let i = 1; i <= 4; i++) t.like(await op('alice', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: `big${s}`, value: big(i) }), { version: i });
    await store.sync();
    const bytesIn = (prefix: string) => store.everything().versions.filter((v) => v.key.startsWith(prefix)).reduce((n, v) => n + v.value.sealed.byteLength, 0);
    const scopeBytes = bytesIn(scopeKey('alice', 'w', 'prod'));
    t.true(scopeBytes <= 4096, `the scope's versions take ${scopeBytes} B`);
    t.true(scopeBytes > 2000, 'and they are kept up to the bound, not dropped wholesale');
    // The oldest went first: big0's earliest versions are gone before big2's.
    const kept = (name: string) => store.everything().versions.filter((v) => v.key.startsWith(`${alice(name)}\u0000`)).map((v) => v.value.version);
    t.true(kept('big0').length <= kept('big2').length, `big0 kept ${kept('big0')}, big2 kept ${kept('big2')}`);
    // The same app in another workspace: its user bound counts both, and its writes there trim
    // only there (the versions of w stay as they were, even though they are its own).
    const inW = store.everything().versions.filter((v) => v.key.startsWith(scopeKey('alice', 'w', 'prod'))).map((v) => v.key);
    for (let i = 1; i <= 6; i++) t.like(await op('alice', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: 'u', value: big(i) }, 'w2'), { version: i });
    await store.sync();
    t.deepEqual(store.everything().versions.filter((v) => v.key.startsWith(scopeKey('alice', 'w', 'prod'))).map((v) => v.key), inW, "w's versions are untouched");
    const userBytes = bytesIn('alice\u0000');
    t.true(userBytes <= 6144, `the app's versions take ${userBytes} B`);
    t.true(bytesIn(scopeKey('alice', 'w2', 'prod')) > 0, "w2's newest versions are kept");
  });

  test("one app's writes never trim another app's versions or deleted secrets, in its workspace or another; each pays for its own", async (t) => {
    const { op, operator, store, deps, another, clock } = await setup(t, { scopeBytes: 4096, appBytes: 6144 });
    const big = (i: number) => `${i}`.padEnd(1000, 'x');
    // chat keeps a version and a deleted secret in w, the operator one in w3.
    await op('alice', 'CreateSecret', { name: 'mine', value: 'mine-1' });
    await op('alice', 'UpdateSecret', { name: 'mine', value: 'mine-2' });
    await op('alice', 'CreateSecret', { name: 'gone', value: 'gone-1' });
    await op('alice', 'DeleteSecret', { name: 'gone' });
    await operatorOp(deps, { op: 'set', user: 'alice', workspace: 'w3', name: 'op', value: 'op-1' });
    await operatorOp(deps, { op: 'set', user: 'alice', workspace: 'w3', name: 'op', value: 'op-2' });
    // plain floods the same workspace, and chat floods another one: every write lands.
    for (let i = 1; i <= 12; i++) {
      clock.now += 1000;
      t.like(await op('plain', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: 'flood', value: big(i) }), { version: i });
      t.like(await op('alice', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: 'flood', value: big(i) }, 'w2'), { version: i });
    }
    t.like(await operator({ op: 'restore', name: 'mine', version: 1 }), { version: 3, restored: 1 });
    t.like(await operator({ op: 'undelete', name: 'gone' }), { version: 1 });
    t.like(await operatorOp(deps, { op: 'restore', user: 'alice', workspace: 'w3', name: 'op', version: 1 }), { data: { version: 3 } });
    // Each flood kept its newest, within its own bound; its oldest went.
    await store.sync();
    const versionsOf = (scope: string, name: string) => store.everything().versions.filter((v) => v.key.startsWith(`${secretKey(scope, name)}\u0000`));
    for (const scope of [scopeKey('alice', 'w', 'prod'), scopeKey('alice', 'w2', 'prod')]) {
      const flood = versionsOf(scope, 'flood');
      const bytes = flood.reduce((n, v) => n + v.value.sealed.byteLength, 0);
      t.true(bytes > 2000 && bytes <= 4096, `${scope}: flood keeps ${bytes} B`);
      t.false(flood.some((v) => v.value.version === 1), 'its oldest went');
    }
    // What each store counts is what it holds, per app (on JetStream, a replica started now too).
    const held = (prefix: string, payer: string) => store.everything().versions.filter((v) => v.key.startsWith(prefix) && payerOf(v.value) === payer).reduce((n, v) => n + v.value.sealed.byteLength, 0);
    const accounts = [
      [scopeAccount(scopeKey('alice', 'w', 'prod'), 'plain'), held(scopeKey('alice', 'w', 'prod'), 'plain')],
      [appAccount('alice', 'chat'), held('alice\u0000', 'chat')],
      [appAccount('alice', '(operator)'), held('alice\u0000', '(operator)')],
    ] as const;
    for (const s of [store, ...(another ? [await another()] : [])]) {
      await s.sync();
      t.deepEqual(await s.write((w) => accounts.map(([a]) => w.accountBytes(a))), accounts.map(([, b]) => b));
    }
    t.true(accounts.every(([, b]) => b > 0));
  });

  test('a record 0.2 wrote (no generation, no size) gets versions when 0.3 updates it; versions a 0.2 delete left behind are found and removed', async (t) => {
    const { op, operator, store } = await setup(t);
    await op('alice', 'CreateSecret', { name: 'legacy', value: 'from-0.2' });
    // As 0.2.0 writes it: the same record without `gen`, `size` or a format slot.
    await store.write((w) => {
      const { gen: _gen, size: _size, format: _f, oldestReader: _o, ...old } = w.secret(alice('legacy'))!;
      w.putSecret(alice('legacy'), old);
    });
    await op('alice', 'UpdateSecret', { name: 'legacy', value: 'from-0.3' });
    t.like(await operator({ op: 'versions', name: 'legacy' }), { versions: [{ version: 2, current: true }, { version: 1, kept: true, size: 8 }] });
    t.like(await op('alice', 'RetrieveSecretVersion', { name: 'legacy', version: 1 }), { data: { value: 'from-0.2' } });
    // A 0.2 replica's delete: the record goes, nothing else.
    await store.write((w) => w.removeSecret(alice('legacy')));
    await store.sync();
    const orphans = orphanVersions(store, 100);
    t.is(orphans.length, 1, 'its version is left behind');
    await store.write((w) => orphans.filter((k) => isOrphan(w, k)).forEach((k) => w.removeVersion(k)));
    await store.sync();
    t.deepEqual(orphanVersions(store, 100), []);
    t.is(store.everything().versions.length, 0);
  });

  test('a delete or undelete cut short between its commits leaves the secret live and its versions whole', async (t) => {
    const { op, operator, store } = await setup(t);
    await op('alice', 'CreateSecret', { name: 'half', value: 'h1' });
    await op('alice', 'UpdateSecret', { name: 'half', value: 'h2' });
    // What a delete leaves when it stops after its first two commits: the deleted record and the version, the secret still live.
    await store.write((w) => {
      const live = w.secret(alice('half'))!;
      w.putDeleted(alice('half'), { format: 1, gen: genOf(live), version: live.version, createdAt: live.createdAt, createdBy: live.createdBy, updatedAt: live.updatedAt, updatedBy: live.updatedBy, history: live.history, deletedAt: 'x', deletedBy: 'chat' });
    });
    await store.sync();
    t.deepEqual(await operator({ op: 'deleted' }), [], 'the stale deleted record is not listed');
    t.regex(String(await operator({ op: 'undelete', name: 'half' })), /^NOT_FOUND/);
    t.regex(String(await operator({ op: 'destroy', name: 'half' })), /^CONFLICT: secret "half" is not deleted/);
    // The delete retried completes, and the versions of the generation are whole.
    await op('alice', 'DeleteSecret', { name: 'half' });
    t.like(await operator({ op: 'undelete', name: 'half' }), { version: 2 });
    t.like(await op('alice', 'RetrieveSecretVersion', { name: 'half', version: 1 }), { data: { value: 'h1' } });
  });

  test('with PIER_VAULT_VERSIONS=0 nothing is kept and a delete is final', async (t) => {
    const { op, operator, store } = await setup(t, { perSecret: 0 });
    await op('alice', 'CreateSecret', { name: 'z', value: 'z1' });
    await op('alice', 'UpdateSecret', { name: 'z', value: 'z2' });
    await op('alice', 'DeleteSecret', { name: 'z' });
    await store.sync();
    t.deepEqual(await operator({ op: 'deleted' }), []);
    t.is(store.everything().versions.length, 0);
    t.is(store.everything().deleted.length, 0);
  });

  test('a huge history stays bounded: 40 updates of 60 KiB with a 1 MiB scope bound', async (t) => {
    const { op, store } = await setup(t, { perSecret: 1000, scopeBytes: 1 << 20 });
    const value = (i: number) => `${i}`.padEnd(60 * 1024, 'y');
    for (let i = 1; i <= 40; i++) t.like(await op('alice', i === 1 ? 'CreateSecret' : 'UpdateSecret', { name: 'huge', value: value(i) }), { version: i });
    await store.sync();
    const bytes = store.everything().versions.reduce((n, v) => n + v.value.sealed.byteLength, 0);
    t.true(bytes <= 1 << 20, `versions take ${bytes} B`);
    t.true(bytes >= (1 << 20) - 62 * 1024, `and fill the bound (${bytes} B)`);
  });

  test('soft delete: gone for apps at once, undeleted as it was within the window; a new creation of the name stays apart', async (t) => {
    const { op, operator } = await setup(t);
    await op('alice', 'CreateSecret', { name: 'k', value: 'old-1' });
    await op('alice', 'UpdateSecret', { name: 'k', value: 'old-2' });
    t.like(await op('alice', 'DeleteSecret', { name: 'k' }), { data: '' });
    t.is(await op('alice', 'RetrieveSecret', { name: 'k' }), 'NOT_FOUND: secret "k" not found in prod');
    t.deepEqual(await op('alice', 'ListSecret', {}), { data: [] });
    t.regex(String(await op('alice', 'ListSecretVersions', { name: 'k' })), /^NOT_FOUND/, 'a deleted secret is invisible to apps');
    t.like(await operator({ op: 'deleted' }), [{ name: 'k', version: 2, deletedBy: 'chat', versionsKept: 1 }]);
    // A create of the same name starts fresh: version 1, none of the deleted one's versions.
    t.like(await op('alice', 'CreateSecret', { name: 'k', value: 'new' }), { version: 1 });
    t.like(await op('alice', 'ListSecretVersions', { name: 'k' }), { data: { versions: [{ version: 1, current: true }] } });
    t.regex(String(await op('alice', 'RetrieveSecretVersion', { name: 'k', version: 2 })), /^NOT_FOUND/, "the deleted generation's version 2 is not this one's");
    t.regex(String(await operator({ op: 'undelete', name: 'k' })), /^CONFLICT: secret "k" exists again \(version 1/);
    // The operator still sees the deleted copy's versions beside the live one.
    t.like(await operator({ op: 'versions', name: 'k' }), { version: 1, deleted: null });
    t.like(await operator({ op: 'versions', name: 'k', deleted: true }), { version: 2, deleted: { by: 'chat' }, versions: [{ version: 2, kept: true }, { version: 1, kept: true }] });
    // Deleting the new one keeps it instead (one deleted copy per name); undelete brings that one back.
    await op('alice', 'DeleteSecret', { name: 'k' });
    t.like(await operator({ op: 'undelete', name: 'k' }), { version: 1 });
    t.like(await op('alice', 'RetrieveSecret', { name: 'k' }), { data: { value: 'new' }, version: 1 });
    // A plain delete and undelete: the value and the version as they were, its history too.
    await op('alice', 'UpdateSecret', { name: 'k', value: 'new-2' });
    await op('alice', 'DeleteSecret', { name: 'k' });
    t.like(await operator({ op: 'versions', name: 'k' }), { deleted: { by: 'chat' }, versions: [{ version: 2, kept: true, current: false }, { version: 1, kept: true }] });
    t.like(await operator({ op: 'undelete', name: 'k' }), { version: 2 });
    t.like(await op('alice', 'RetrieveSecret', { name: 'k' }), { data: { value: 'new-2' }, version: 2 });
    t.like(await op('alice', 'RetrieveSecretVersion', { name: 'k', version: 1 }), { data: { value: 'new' } });
    t.regex(String(await operator({ op: 'undelete', name: 'k' })), /^NOT_FOUND: no deleted secret "k"/);
  });

  test('destroy: a version, a deleted secret, and every deleted secret past the window; destroyed values are in no export (and on JetStream in no stream file)', async (t) => {
    const { op, operator, store, clock, deps, files, erases, another } = await setup(t);
    const marker = (s: string) => `${s}-${randomBytes(8).toString('hex')}`;
    const values = { v1: marker('v1'), v2: marker('v2'), gone: marker('gone'), late: marker('late') };
    await op('alice', 'CreateSecret', { name: 'k', value: values.v1 });
    await op('alice', 'UpdateSecret', { name: 'k', value: values.v2 });
    await store.sync();
    const v1Sealed = Buffer.from(store.version(versionKey(alice('k'), genOf(store.secret(alice('k'))!), 1))!.sealed);
    const { readFileSync } = await import('node:fs');
    const holding = (stream: string, bytes = v1Sealed) => files().filter((f) => f.includes(stream) && readFileSync(f).includes(bytes));
    // Under a value key of its own (keyed): the wrapped key is on disk until the destroy, and only there.
    const v1Key = keyIdOf(v1Sealed);
    t.is(v1Key !== undefined, keyed, keyed ? 'sealed under a value key' : 'sealed with the data key');
    const v1Wrapped = v1Key === undefined ? undefined : Buffer.from(store.valueKey(v1Key)!.wrapped);
    if (v1Wrapped) t.not(holding('', v1Wrapped).length, 0, 'before the destroy, the value key is on disk (the scan below can fail)');
    if (erases) {
      t.not(holding('KV_pier-vault-versions').length, 0, 'before the destroy, the versions stream holds the sealed bytes (the scan below can fail)');
      t.not(holding('KV_pier-vault-secrets').length, 0, "and so does the secrets bucket's history (version 1 was the secret's record once)");
    }
    t.deepEqual(await operator({ op: 'destroy', name: 'k', version: 1 }), { name: 'k', env: 'prod', destroyed: [1] });
    t.regex(String(await op('alice', 'RetrieveSecretVersion', { name: 'k', version: 1 })), /^NOT_FOUND/);
    if (v1Key !== undefined) {
      t.is(store.valueKey(v1Key), undefined, 'its value key is gone');
      t.deepEqual(holding('', v1Wrapped), [], 'and in no file of the store, at the answer');
      t.like(await op('alice', 'RetrieveSecret', { name: 'k' }), { data: { value: values.v2 } }, 'the current value, under its own key, is whole');
    }
    t.regex(String(await operator({ op: 'destroy', name: 'k' })), /^CONFLICT: secret "k" is not deleted/);
    // A deleted secret destroyed whole by the operator.
    await op('alice', 'CreateSecret', { name: 'd', value: values.gone });
    await op('alice', 'DeleteSecret', { name: 'd' });
    t.like(await operator({ op: 'destroy', name: 'd' }), { destroyed: [1] });
    t.regex(String(await operator({ op: 'undelete', name: 'd' })), /^NOT_FOUND/);
    // Past the window: the sweep's selection finds it, destroyGeneration takes it (what the hourly timer does).
    await op('alice', 'CreateSecret', { name: 'e', value: values.late });
    await op('alice', 'DeleteSecret', { name: 'e' });
    await store.sync();
    t.deepEqual(expiredDeleted(store, deps.bounds, clock.now + DAY, 100), [], 'within the window: kept');
    const expired = expiredDeleted(store, deps.bounds, clock.now + 8 * DAY, 100);
    t.is(expired.length, 1);
    await store.write((w) => expired.forEach((e) => destroyGeneration(w, e.key, e.gen)));
    t.regex(String(await operator({ op: 'undelete', name: 'e' })), /^NOT_FOUND/);
    // Nothing destroyed in an export (the values sealed, so look for the sealed bytes themselves).
    const exported = Buffer.from(JSON.stringify(await vaultRecords(store), (_k, v) => (v instanceof Uint8Array || (v && v.type === 'Buffer') ? Buffer.from(v.data ?? v).toString('hex') : v)));
    t.false(exported.includes(v1Sealed.toString('hex')), 'the destroyed version is not exported');
    t.is((await vaultRecords(store)).filter((r) => r.kind === 'version' || r.kind === 'deleted').length, 0, 'k has no earlier version left, d and e are gone whole');
    // Keyed: the one value key left is the current value's.
    const current = keyIdOf(store.secret(alice('k'))!.sealed);
    t.deepEqual((await vaultRecords(store)).filter((r) => r.kind === 'valueKey').map((r) => (r as { key: string }).key), current === undefined ? [] : [current]);
    if (!erases) return t.pass();
    // On JetStream: neither the versions stream's files nor the secrets bucket's hold them any more.
    t.deepEqual(holding('KV_pier-vault-versions'), [], 'erased from the versions stream on disk');
    t.deepEqual(holding('KV_pier-vault-secrets'), [], "erased from the secrets bucket's history on disk");
    // A replica starting now judges the key from what is left (its history begins later): it reads
    // the current value, refuses a create over it, and its own update lands for both.
    const fresh = await another!();
    await fresh.sync();
    t.is(fresh.secret(alice('k'))?.version, 2);
    await t.throwsAsync(fresh.write((w) => {
      if (w.secret(alice('k'))) throw new Error('exists');
      w.putSecret(alice('k'), { ...store.secret(alice('k'))!, version: 1 });
    }), { message: 'exists' });
    t.like(await op('alice', 'UpdateSecret', { name: 'k', value: 'after-erasure', version: 2 }), { version: 3 });
    await fresh.sync();
    const seen = await (async () => {
      for (let i = 0; i < 50 && fresh.secret(alice('k'))?.version !== 3; i++) await new Promise((r) => setTimeout(r, 100));
      return fresh.secret(alice('k'))?.version;
    })();
    t.is(seen, 3, "the fresh replica follows the first one's write after the erased history");
  });

  if (!keyed) return;

  test('rekey: values written before every replica sealed under value keys are sealed anew, resumably, audited; destroyed afterwards they are gone from every file', async (t) => {
    const { op, operator, store, deps, gate, audited, files, erases } = await setup(t);
    gate.keyed = false;
    const marker = (s: string) => `${s}-${randomBytes(8).toString('hex')}`;
    const values = { a1: marker('a1'), a2: marker('a2'), b: marker('b') };
    await op('alice', 'CreateSecret', { name: 'a', value: values.a1 });
    await op('alice', 'UpdateSecret', { name: 'a', value: values.a2 });
    await op('alice', 'CreateSecret', { name: 'b', value: values.b });
    await store.sync();
    // Refused while a replica of an earlier release runs (the gate closed): nothing sealed anew.
    t.regex(String(await rekey(deps, {}).catch((e: Error) => e.message)), /an earlier release is running/);
    t.like(await rekey(deps, { status: true }), { secrets: { valueKeys: 0, dataKeys: 2 }, versions: { valueKeys: 0, dataKeys: 1 }, sealingUnderValueKeys: false });
    const oldA1 = Buffer.from(store.version(versionKey(alice('a'), genOf(store.secret(alice('a'))!), 1))!.sealed);
    gate.keyed = true;
    // Resumable: a call with a limit takes that many; the next takes the rest.
    t.like(await rekey(deps, { limit: 2 }), { rekeyed: 2, sealingUnderValueKeys: true });
    t.like(await rekey(deps, {}), { rekeyed: 1, unreadable: 0, secrets: { valueKeys: 2, dataKeys: 0 }, versions: { valueKeys: 1, dataKeys: 0 } });
    t.like(await rekey(deps, {}), { rekeyed: 0 }, 'nothing left');
    t.true(audited.some((e) => e.op === 'Rekey' && e.app === '(operator)' && e.workspace === 'w' && e.env === 'prod'), 'audited per scope');
    // Every value reads as before, versions included, and check-and-set still holds at the same version.
    t.like(await op('alice', 'RetrieveSecret', { name: 'a' }), { data: { value: values.a2 }, version: 2 });
    t.like(await op('alice', 'RetrieveSecretVersion', { name: 'a', version: 1 }), { data: { value: values.a1 } });
    t.like(await op('alice', 'RetrieveSecret', { name: 'b' }), { data: { value: values.b }, version: 1 });
    t.regex(String(await op('alice', 'UpdateSecret', { name: 'b', value: 'x', version: 2 })), /^CONFLICT/);
    await store.sync();
    const v1 = store.version(versionKey(alice('a'), genOf(store.secret(alice('a'))!), 1))!;
    const v1Key = keyIdOf(v1.sealed)!;
    t.truthy(v1Key, 'version 1 is under a value key now');
    const { readFileSync } = await import('node:fs');
    if (erases) t.deepEqual(files().filter((f) => readFileSync(f).includes(oldA1)), [], "JetStream: the version's earlier value left the stream when it was sealed anew");
    const wrapped = Buffer.from(store.valueKey(v1Key)!.wrapped);
    t.deepEqual(await operator({ op: 'destroy', name: 'a', version: 1 }), { name: 'a', env: 'prod', destroyed: [1] });
    t.deepEqual(files().filter((f) => readFileSync(f).includes(wrapped)), [], 'its value key is in no file of the store at the answer');
    t.like(await op('alice', 'RetrieveSecret', { name: 'a' }), { data: { value: values.a2 } }, 'the current value is whole');
  });

  test('value keys travel: an export imported into an empty store reads every value; a master key rotation leaves them whole', async (t) => {
    const { op, store, keyring, clock } = await setup(t);
    const [a1, a2] = [`a1-${randomBytes(6).toString('hex')}`, `a2-${randomBytes(6).toString('hex')}`];
    await op('alice', 'CreateSecret', { name: 'a', value: a1 });
    await op('alice', 'UpdateSecret', { name: 'a', value: a2 });
    await store.sync();
    const records = await vaultRecords(store);
    t.is(records.filter((r) => r.kind === 'valueKey').length, 2, 'both values\' keys are exported');
    // Into another store (the restore of an export on a new host), under the same master key.
    const other = await open();
    t.teardown(() => other.close());
    await vaultImportBatch(other.store, records, keyring);
    await other.store.sync();
    const there = vaultOn(other.store, BOUNDS, clock, true, keyring);
    t.like(await there.op('alice', 'RetrieveSecret', { name: 'a' }), { data: { value: a2 } });
    t.like(await there.op('alice', 'RetrieveSecretVersion', { name: 'a', version: 1 }), { data: { value: a1 } });
    // Rotation: the data keys re-wrapped under a new master key; value keys, wrapped by the data keys, are untouched.
    const next = new Keyring(randomBytes(32), keyring.current);
    t.is(await new DataKeys(other.store, next, () => new Date(clock.now)).rewrapAll(), 1);
    const rotated = vaultOn(other.store, BOUNDS, clock, true, new Keyring(next.current));
    t.like(await rotated.op('alice', 'RetrieveSecret', { name: 'a' }), { data: { value: a2 } });
    t.like(await rotated.op('alice', 'RetrieveSecretVersion', { name: 'a', version: 1 }), { data: { value: a1 } });
  });
}

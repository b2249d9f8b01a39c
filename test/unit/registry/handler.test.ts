import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PierError } from '../../../bus/errors.js';
import type { ChangeEvent } from '../../../bus/subjects.js';
import * as h from '../../../actors/registry/handler.js';
import { LmdbRegistryStore } from '../../../actors/registry/store.js';
import { cleanup, ROOT, tempDir } from '../../helpers/pier.js';
import { Keyring } from '../../../lib/crypto/keyring.js';

const manifest = readFileSync(join(ROOT, 'examples', 'PlatformManifest.yaml'), 'utf8');
const notes = readFileSync(join(ROOT, 'examples', 'notes-manifest.yaml'), 'utf8');
const provider = readFileSync(join(ROOT, 'examples', 'ProviderRegistry.yaml'), 'utf8');

function setup(t: { teardown(fn: () => void): void }) {
  const dir = tempDir();
  const store = LmdbRegistryStore.open(join(dir, 'registry'));
  const events: ChangeEvent[] = [];
  const deps: h.RegistryDeps = { store, keyring: new Keyring(randomBytes(32)), now: () => new Date('2026-01-02T03:04:05Z'), publish: (e) => events.push(e) };
  t.teardown(() => {
    void store.close().then(() => cleanup(dir));
  });
  return { deps, store, events, dir };
}

const install = (deps: h.RegistryDeps, over: Partial<h.InstallRequest> = {}) => h.appInstall(deps, { user: 'alice', manifest, providers: [], host: '127.0.0.1', ...over });

test('user add issues a token and a change event; a second add is 409 and changes nothing', async (t) => {
  const { deps, events, store } = setup(t);
  const issued = await h.userAdd(deps, 'alice');
  t.regex(issued.token, /^pier_[A-Za-z0-9_-]{43}$/);
  t.is(events.length, 1);
  t.is(events[0].revision, 1);
  const err = await t.throwsAsync(h.userAdd(deps, 'alice'), { instanceOf: PierError });
  t.is(err!.code, 'CONFLICT');
  t.is(events.length, 1);
  t.is(store.revision(), 1);
});

test('app keys fit bcrypt: key + 10-digit timestamp + secret <= 72 bytes, secret >= 128 bits', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  const app = await install(deps);
  t.true(app.appKey.length + 10 + app.appSecret.length <= 72);
  // base64url: 6 bits a character
  t.true(app.appSecret.length * 6 >= 128);
  t.regex(app.appSecret, /^[A-Za-z0-9_-]+$/);
});

test('install for an unknown user is 404; a second install of the same app is 409', async (t) => {
  const { deps } = setup(t);
  t.is((await t.throwsAsync(install(deps), { instanceOf: PierError }))!.code, 'NOT_FOUND');
  await h.userAdd(deps, 'alice');
  await install(deps);
  const err = await t.throwsAsync(install(deps), { instanceOf: PierError });
  t.is(err!.code, 'CONFLICT');
  t.is(h.appList(deps, 'alice').length, 1);
});

test('an invalid provider document aborts the whole install', async (t) => {
  const { deps, store } = setup(t);
  await h.userAdd(deps, 'alice');
  const before = store.revision();
  const err = await t.throwsAsync(install(deps, { manifest: notes, providers: [provider.replace('user-system-alice', 'user-system-bob')] }), { instanceOf: PierError });
  t.is(err!.code, 'BAD_REQUEST');
  t.is(store.revision(), before);
  t.deepEqual(h.appList(deps), []);
  t.deepEqual(store.listProviders(), []);
});

test('the app secret is sealed: not in the database file, and opened only for its app', async (t) => {
  const { deps, dir } = setup(t);
  await h.userAdd(deps, 'alice');
  const app = await install(deps);
  await deps.store.close();
  const reopened = LmdbRegistryStore.open(join(dir, 'registry'));
  t.teardown(() => void reopened.close());
  for (const f of readdirSync(join(dir, 'registry'))) {
    const bytes = readFileSync(join(dir, 'registry', f));
    t.false(bytes.includes(Buffer.from(app.appSecret)), `secret in clear in ${f}`);
  }
  const creds = h.appCredentials({ ...deps, store: reopened }, app.appKey);
  t.is(creds.appSecret, app.appSecret);
  const wrongKey = t.throws(() => h.appCredentials({ ...deps, store: reopened, keyring: new Keyring(randomBytes(32)) }, app.appKey), { instanceOf: PierError });
  t.is(wrongKey!.code, 'INTERNAL');
  t.notRegex(wrongKey!.message, new RegExp(app.appSecret));
});

test('uninstall removes the app, its key and its providers; unknown app is 404', async (t) => {
  const { deps, store, events } = setup(t);
  await h.userAdd(deps, 'alice');
  const app = await install(deps, { manifest: notes, providers: [provider] });
  t.is(store.getProvider('provider-notes-alice')?.state, 'active');
  await h.appUninstall(deps, 'alice', 'notes', true);
  t.is(store.appByKey(app.appKey), undefined);
  t.is(store.getProvider('provider-notes-alice'), undefined);
  t.deepEqual(store.listProviders(), []);
  const last = events.at(-1)!;
  t.deepEqual(last.changes.map((c) => `${c.kind}:${c.op}`), ['provider:delete', 'app:delete']);
  t.true((last.changes[1] as { purge: boolean }).purge);
  t.is((await t.throwsAsync(h.appUninstall(deps, 'alice', 'notes', false), { instanceOf: PierError }))!.code, 'NOT_FOUND');
  // A reinstall with its provider document registers the provider again, active.
  await install(deps, { manifest: notes, providers: [provider] });
  t.is(store.getProvider('provider-notes-alice')?.state, 'active');
});

test('a provider name or target owned by another app is 409', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, { manifest: notes, providers: [provider] });
  const other = notes.replace('name: notes', 'name: notes2');
  const err = await t.throwsAsync(install(deps, { manifest: other, providers: [provider] }), { instanceOf: PierError });
  t.is(err!.code, 'CONFLICT');
  const sameTarget = provider.replace('name: provider-notes-alice', 'name: provider-notes2-alice');
  const err2 = await t.throwsAsync(install(deps, { manifest: other, providers: [sameTarget] }), { instanceOf: PierError });
  t.is(err2!.code, 'CONFLICT');
  t.regex(err2!.message, /already serves legacy_notes\/api\.notes\/v2/);
});

test('suspend and resume a provider; after its app is uninstalled there is nothing to resume', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, { manifest: notes, providers: [provider] });
  t.is((await h.providerSetState(deps, 'provider-notes-alice', 'suspended')).state, 'suspended');
  t.is((await h.providerSetState(deps, 'provider-notes-alice', 'active')).state, 'active');
  await h.appUninstall(deps, 'alice', 'notes', false);
  t.is((await t.throwsAsync(h.providerSetState(deps, 'provider-notes-alice', 'active'), { instanceOf: PierError }))!.code, 'NOT_FOUND');
  t.is((await t.throwsAsync(h.providerSetState(deps, 'nope', 'active'), { instanceOf: PierError }))!.code, 'NOT_FOUND');
});

test('revoke deletes every token of the user and nobody else\'s', async (t) => {
  const { deps, store } = setup(t);
  await h.userAdd(deps, 'alice');
  await h.userToken(deps, 'alice');
  await h.userAdd(deps, 'bob');
  t.deepEqual(await h.userRevoke(deps, 'alice'), { name: 'alice', revoked: 2 });
  t.is(store.listTokens('alice').length, 0);
  t.is(store.listTokens('bob').length, 1);
  t.is((await t.throwsAsync(h.userRevoke(deps, 'carol'), { instanceOf: PierError }))!.code, 'NOT_FOUND');
});

test('token digests are stored, never tokens', async (t) => {
  const { deps, store } = setup(t);
  const { token } = await h.userAdd(deps, 'alice');
  const [stored] = store.listTokens('alice');
  t.not(stored.digest, token);
  t.false(JSON.stringify(store.snapshot()).includes(token));
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { PierError } from '../../../bus/errors.js';
import * as h from '../../../actors/registry/handler.js';
import { LmdbRegistryStore, type RegistryStore } from '../../../actors/registry/store.js';
import { cleanup, tempDir } from '../../helpers/pier.js';
import { Keyring } from '../../../lib/crypto/keyring.js';
import { concurrentNestedInstalls, depsOf, uploadManifest } from '../../helpers/registry-installs.js';

// docs/protocol.md "Upload" (amended 2026-11-23): nesting upload folders of one user's apps are refused
// at install (409 naming the other app) unless --shared-dest.

function setup(t: { teardown(fn: () => void): void }) {
  const dir = tempDir();
  const store = LmdbRegistryStore.open(join(dir, 'registry'));
  const deps = depsOf(store, new Keyring(randomBytes(32)));
  t.teardown(() => {
    void store.close().then(() => cleanup(dir));
  });
  return { deps, store, dir };
}

const install = (deps: h.RegistryDeps, name: string, dest: string | null, over: Partial<h.InstallRequest> = {}) =>
  h.appInstall(deps, { user: 'alice', manifest: uploadManifest(name, dest), providers: [], host: '127.0.0.1', ...over });

async function refused(t: { throwsAsync: (p: Promise<unknown>, e: object) => Promise<PierError | undefined> }, p: Promise<unknown>): Promise<PierError> {
  const err = await t.throwsAsync(p, { instanceOf: PierError });
  return err!;
}

test('an app inside an installed app\'s dest is 409 naming the other app and both dests; nothing is written', async (t) => {
  const { deps, store } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'files', '/data');
  const before = store.revision();
  const err = await refused(t, install(deps, 'chat', '/data/chat'));
  t.is(err.code, 'CONFLICT');
  t.is(err.message, 'upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": install with --shared-dest if the two apps trust each other');
  t.deepEqual(err.data, { app: 'files', dest: '/data' });
  t.is(store.revision(), before);
  t.deepEqual(h.appList(deps, 'alice').map((a) => a.app), ['files']);
});

test('the reverse order is refused too: an app around an installed one', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'chat', '/data/chat');
  const err = await refused(t, install(deps, 'files', '/data/'));
  t.is(err.code, 'CONFLICT');
  t.is(err.message, 'upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": install with --shared-dest if the two apps trust each other');
});

test('equal dests are refused; /database beside /data is not', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'files', '/data');
  t.is((await refused(t, install(deps, 'other', '/data//'))).message, 'upload.dest "/data" of app "other" is also the upload.dest of app "files": install with --shared-dest if the two apps trust each other');
  await install(deps, 'db', '/database');
  t.deepEqual(h.appList(deps, 'alice').map((a) => a.app), ['db', 'files']);
});

test('dest: / is refused alone and beside others; --shared-dest accepts it and is shown by app list', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  const alone = await refused(t, install(deps, 'all', '/'));
  t.is(alone.code, 'CONFLICT');
  t.regex(alone.message, /^upload\.dest "\/" of app "all" encloses the user's whole folder/);
  await install(deps, 'all', '/', { sharedDest: true });
  // The operator's word was for "all": a newcomer inside it still needs its own.
  t.is((await refused(t, install(deps, 'chat', '/data/chat'))).message, 'upload.dest "/" of app "all" encloses "/data/chat" of app "chat": install with --shared-dest if the two apps trust each other');
  await install(deps, 'chat', '/data/chat', { sharedDest: true });
  t.deepEqual(
    h.appList(deps, 'alice').map((a) => [a.app, a.sharedDest]),
    [['all', true], ['chat', true]],
  );
});

test('--shared-dest accepts a nested pair; an app installed without it lists sharedDest false', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'files', '/data');
  await install(deps, 'chat', '/data/chat', { sharedDest: true });
  t.deepEqual(h.appList(deps, 'alice').map((a) => [a.app, a.sharedDest]), [['chat', true], ['files', false]]);
});

test('apps of different users may have the same dest', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await h.userAdd(deps, 'bob');
  await install(deps, 'files', '/data');
  await install(deps, 'files', '/data', { user: 'bob' });
  t.is(h.appList(deps).filter((a) => a.app === 'files').length, 2);
});

test('an app with no upload section is never refused for this, even beside dest: /', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'all', '/', { sharedDest: true });
  await install(deps, 'notes', null);
  t.deepEqual(h.appList(deps, 'alice').map((a) => [a.app, a.sharedDest]), [['all', true], ['notes', false]]);
});

test('installing an installed app again is still "already installed", not a dest conflict with itself; after uninstall it installs again', async (t) => {
  const { deps } = setup(t);
  await h.userAdd(deps, 'alice');
  await install(deps, 'files', '/data');
  t.is((await refused(t, install(deps, 'files', '/data'))).message, 'app "files" is already installed for user "alice"');
  await h.appUninstall(deps, 'alice', 'files', false);
  await install(deps, 'files', '/data/new');
  t.deepEqual(h.appList(deps, 'alice').map((a) => a.app), ['files']);
});

test('concurrent nested installs over two replicas of one LMDB environment: exactly one wins', async (t) => {
  const { deps, dir } = setup(t);
  const other: RegistryStore = LmdbRegistryStore.open(join(dir, 'registry'));
  t.teardown(() => void other.close());
  await concurrentNestedInstalls(t, deps, { ...deps, store: other });
});

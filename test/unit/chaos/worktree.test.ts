import test from 'ava';
import { sameDependencies } from '../../../chaos/worktree.js';

// The upgrade harness runs the previous release on a hard-linked copy of this checkout's
// node_modules when that holds every package the old lockfile installs, at the same path and
// resolution (chaos/worktree.ts); otherwise it pays an `npm ci`.
const lock = (version: string, packages: Record<string, unknown>) => Buffer.from(JSON.stringify({ name: 'pier', version, lockfileVersion: 3, packages: { '': { name: 'pier', version, dependencies: Object.fromEntries(Object.keys(packages).map((k) => [k.replace('node_modules/', ''), '*'])) }, ...packages } }));
const pkg = (version: string) => ({ version, resolved: `https://registry.npmjs.org/x/-/x-${version}.tgz`, integrity: `sha512-${version}` });

test('reused: the same tree, a new root version, or packages added since', (t) => {
  const old = lock('0.2.0', { 'node_modules/a': pkg('1.0.0'), 'node_modules/b/node_modules/c': pkg('2.0.0') });
  t.true(sameDependencies(old, old));
  t.true(sameDependencies(old, lock('0.3.0-dev', { 'node_modules/a': pkg('1.0.0'), 'node_modules/b/node_modules/c': pkg('2.0.0') })));
  t.true(sameDependencies(old, lock('0.3.0-dev', { 'node_modules/a': pkg('1.0.0'), 'node_modules/b/node_modules/c': pkg('2.0.0'), 'node_modules/otel': pkg('9.0.0') })));
});

test('installed: a package of the old tree changed, moved or gone; or a lockfile that is not one', (t) => {
  const old = lock('0.2.0', { 'node_modules/a': pkg('1.10.0'), 'node_modules/b': pkg('2.0.0') });
  t.false(sameDependencies(old, lock('0.3.0', { 'node_modules/a': pkg('1.9.1'), 'node_modules/b': pkg('2.0.0') })), 'a version changed');
  t.false(sameDependencies(old, lock('0.3.0', { 'node_modules/x/node_modules/a': pkg('1.10.0'), 'node_modules/b': pkg('2.0.0') })), 'a package moved');
  t.false(sameDependencies(old, lock('0.3.0', { 'node_modules/b': pkg('2.0.0') })), 'a package gone');
  t.false(sameDependencies(Buffer.from('not json'), old));
  t.false(sameDependencies(old, Buffer.from('{}')));
});

import test from 'ava';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { ROOT } from '../../helpers/pier.js';

// The first screen of `npm start` on a fresh machine (Node 20, npm 11) is Pier's, not npm's
// warnings: no installed package refuses Node 20, and every install script is reviewed in
// package.json's `allowScripts` (the native packages ship prebuilt binaries: none needs its script).

interface LockEntry {
  version?: string;
  engines?: { node?: string };
  hasInstallScript?: boolean;
}
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string }; allowScripts?: Record<string, boolean> };
const nameOf = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);

test('no installed package refuses the Node Pier supports (no EBADENGINE at install)', (t) => {
  const oldest = semver.minVersion(manifest.engines.node)!.version;
  t.is(oldest, '20.0.0');
  // npm compares with the Node running it: the supported line's current release.
  const node20 = '20.20.0';
  const refusing = Object.entries(lock.packages)
    .filter(([path, p]) => path !== '' && p.engines?.node !== undefined && !semver.satisfies(node20, p.engines.node))
    .map(([path, p]) => `${nameOf(path)}@${p.version}: node ${p.engines!.node}`);
  t.deepEqual(refusing, []);
});

test('every package with an install script is reviewed in allowScripts (no install-scripts notice)', (t) => {
  const withScripts = [...new Set(Object.entries(lock.packages).filter(([, p]) => p.hasInstallScript).map(([path]) => nameOf(path)))];
  t.true(withScripts.length > 0, 'the lock says which packages have install scripts');
  t.deepEqual(withScripts.filter((name) => manifest.allowScripts?.[name] === undefined), []);
});

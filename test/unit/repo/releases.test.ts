import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../../helpers/pier.js';

// docs/operations.md "Upgrading": releases.json names the previous release's commit, so a clean
// clone can build it (`npm run upgrade`); the package, the file and CHANGELOG.md agree.
const releases = JSON.parse(readFileSync(join(ROOT, 'releases.json'), 'utf8')) as { current: string; previous: { version: string; commit: string } };
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const changelog = readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8');

test('the package carries the current release, and CHANGELOG.md has a section for it and for none later', (t) => {
  t.is(releases.current, pkg.version);
  const headings = [...changelog.matchAll(/^## (\S+)/gm)].map((m) => m[1]);
  t.true(headings.includes(releases.current) || headings[0] === 'Unreleased', `CHANGELOG.md headings: ${headings.join(', ')}`);
  t.true(headings.every((h) => h === 'Unreleased' || /^\d+\.\d+\.\d+$/.test(h)), `headings are versions: ${headings.join(', ')}`);
});

test('the previous release is a full commit of this repository, older than the current one', (t) => {
  t.regex(releases.previous.commit, /^[0-9a-f]{40}$/);
  t.not(releases.previous.version, releases.current);
  const found = spawnSync('git', ['cat-file', '-t', releases.previous.commit], { cwd: ROOT, encoding: 'utf8' });
  t.is(found.stdout.trim(), 'commit', `git cat-file: ${found.stderr}`);
  const shown = spawnSync('git', ['show', `${releases.previous.commit}:package.json`], { cwd: ROOT, encoding: 'utf8' });
  t.is((JSON.parse(shown.stdout) as { version: string }).version, releases.previous.version, 'its package.json carries the version named');
});

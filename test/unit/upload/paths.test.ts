import test from 'ava';
import { mkdirSync, writeFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PierError } from '../../../bus/errors.js';
import { checkRelativePath, inside, resolveTarget, typeAllowed } from '../../../actors/upload/paths.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

test('relative paths: refused as text before touching the disk', (t) => {
  for (const ok of ['a.txt', 'a/b/c.txt', 'folder/', 'a b/ü.txt', '...txt', 'a..b']) t.notThrows(() => checkRelativePath(ok), ok);
  for (const bad of ['', '/', '../a', 'a/../b', 'a/..', './a', 'a/./b', '/abs', 'a\\b', 'a\0b', '%2e%2e/a', 'a/%2F', 'a//b', 'C:/x', 'a\u0001b', `${'n'.repeat(256)}`]) {
    t.throws(() => checkRelativePath(bad), { instanceOf: PierError }, JSON.stringify(bad));
  }
});

test('inside(): the parent itself or below, never a sibling with a common prefix', (t) => {
  t.true(inside('/data/a', '/data/a'));
  t.true(inside('/data/a', '/data/a/b'));
  t.false(inside('/data/a', '/data/ab'));
  t.false(inside('/data/a', '/data'));
});

test('file types: case-insensitive, leading dot ignored, * for any', (t) => {
  t.true(typeAllowed(['pdf'], '.PDF', 'a/b.txt'));
  t.true(typeAllowed(['.Csv'], 'csv', 'x'));
  t.true(typeAllowed(['*'], 'anything', 'x'));
  t.false(typeAllowed(['pdf'], 'pdfx', 'a.pdf'), 'a declared extension is what is checked');
});

test('file types: a MIME type or an empty file_type means the file name extension', (t) => {
  t.true(typeAllowed(['pdf'], 'application/pdf', 'docs/Report.PDF'));
  t.false(typeAllowed(['pdf'], 'application/pdf', 'docs/report.exe'));
  t.true(typeAllowed(['csv'], '', 'data.csv'));
  t.false(typeAllowed(['pdf'], '', 'data.csv'));
  t.false(typeAllowed(['pdf'], '', 'README'), 'no extension: only * allows it');
  t.false(typeAllowed(['pdf'], '', '.pdf'), 'a dot file has no extension');
  t.true(typeAllowed(['*'], '', 'README'));
  t.true(typeAllowed(['*'], 'application/octet-stream', 'blob'));
});

test('targets: folders created one by one inside dest; a symlink out is refused before anything is created', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const dest = join(dir, 'dest');
  const outside = join(dir, 'outside');
  mkdirSync(join(dest, 'in'), { recursive: true });
  mkdirSync(outside);
  symlinkSync(outside, join(dest, 'in', 'out'));
  const ok = await resolveTarget(dest, join(dest, 'in'), 'x/y/z.bin');
  t.is(ok.target, join(dest, 'in', 'x', 'y', 'z.bin'));
  await t.throwsAsync(resolveTarget(dest, join(dest, 'in'), 'out/new/z.bin'), { message: /leads outside/ });
  await t.throwsAsync(resolveTarget(dest, 'relative', 'z.bin'), { message: /absolute path/ });
  // Outside, missing, missing outside, or a file: one answer, so no answer tells whether a host path exists.
  const same = "storage_path: must be an existing folder inside the app's upload folder";
  writeFileSync(join(dest, 'in', 'a-file'), 'x');
  for (const storage of [outside, join(dest, 'missing'), join(outside, 'missing'), '/etc', '/no/such/path', join(dest, 'in', 'a-file')]) {
    await t.throwsAsync(resolveTarget(dest, storage, 'z.bin'), { message: same }, storage);
  }
});

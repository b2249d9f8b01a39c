import test from 'ava';
import { existsSync, mkdirSync, writeFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PierError } from '../../../bus/errors.js';
import { checkRelativePath, inside, resolveTarget, stillInside } from '../../../actors/upload/paths.js';
import { typeRefusal } from '../../../actors/upload/file-types.js';
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

test('targets: the walk from the user\'s folder creates folders one by one inside dest; a link anywhere on the way is refused, whatever it points at', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const user = join(dir, 'files', 'alice');
  const dest = join(user, 'dest');
  const outside = join(dir, 'outside');
  mkdirSync(join(dest, 'in', 'inner'), { recursive: true });
  mkdirSync(outside);
  symlinkSync(outside, join(dest, 'in', 'out'));
  symlinkSync(join(dest, 'in', 'inner'), join(dest, 'in', 'inside-link'));
  const ok = await resolveTarget(user, dest, join(dest, 'in'), 'x/y/z.bin');
  t.is(ok.target, join(dest, 'in', 'x', 'y', 'z.bin'));
  const pathRule = /file_relative_path: must lead through folders inside the app's upload folder/;
  await t.throwsAsync(resolveTarget(user, dest, join(dest, 'in'), 'out/new/z.bin'), { message: pathRule });
  await t.throwsAsync(resolveTarget(user, dest, join(dest, 'in'), 'inside-link/z.bin'), { message: pathRule }, 'a link that stays inside is refused too');
  t.false(existsSync(join(outside, 'new')), 'nothing was created through the link');
  await t.throwsAsync(resolveTarget(user, dest, 'relative', 'z.bin'), { message: /absolute path/ });
  // Outside, missing, missing outside, a file, a link: one answer, so no answer tells whether a host path exists.
  const same = "storage_path: must be an existing folder inside the app's upload folder, reached without links";
  writeFileSync(join(dest, 'in', 'a-file'), 'x');
  for (const storage of [outside, join(dest, 'missing'), join(outside, 'missing'), '/etc', '/no/such/path', join(dest, 'in', 'a-file'), join(dest, 'in', 'out'), join(dest, 'in', 'inside-link')]) {
    await t.throwsAsync(resolveTarget(user, dest, storage, 'z.bin'), { message: same }, storage);
  }
});

test('targets: dest itself swapped for a link (an enclosing app did it) is refused; so is a dest above the user\'s folder', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const user = join(dir, 'files', 'alice');
  const outside = join(dir, 'outside');
  mkdirSync(join(user, 'data'), { recursive: true });
  mkdirSync(outside);
  symlinkSync(outside, join(user, 'data', 'chat'));
  const same = /storage_path: must be an existing folder inside the app's upload folder/;
  await t.throwsAsync(resolveTarget(user, join(user, 'data', 'chat'), join(user, 'data', 'chat'), 'z.bin'), { message: same });
  await t.throwsAsync(resolveTarget(user, join(dir, 'files'), join(dir, 'files'), 'z.bin'), { message: same });
  t.false(await stillInside(user, join(user, 'data', 'chat')));
  t.true(await stillInside(user, join(user, 'data')));
});

test('file types: the name decides, case-insensitive, a leading dot ignored, * for any', (t) => {
  t.is(typeRefusal(['pdf'], '.PDF', 'a/b.pdf'), null);
  t.is(typeRefusal(['.Csv'], 'csv', 'x.CSV'), null);
  t.is(typeRefusal(['*'], 'anything', 'x'), null);
  t.regex(typeRefusal(['pdf'], 'pdf', 'index.html')!, /file_relative_path: the extension of "index.html" is not allowed, whatever file_type says/);
  t.regex(typeRefusal(['pdf', 'html'], 'pdf', 'index.html')!, /file_type: "pdf" does not match the file name "index.html"/);
  t.regex(typeRefusal(['pdf'], 'pdfx', 'a.pdf')!, /file_type: "pdfx" is not allowed/);
});

test('file types: a MIME type must agree with the name; an empty or generic one leaves it to the name', (t) => {
  t.is(typeRefusal(['pdf'], 'application/pdf', 'docs/Report.PDF'), null);
  t.regex(typeRefusal(['pdf'], 'application/pdf', 'docs/report.exe')!, /file_type: "application\/pdf" is not allowed for "report.exe"/);
  t.regex(typeRefusal(['pdf', 'png'], 'image/png', 'docs/report.pdf')!, /file_type: "image\/png" does not match/);
  t.is(typeRefusal(['csv'], '', 'data.csv'), null);
  t.is(typeRefusal(['csv'], 'application/vnd.ms-excel', 'data.csv'), null, 'what Windows browsers send for a .csv');
  t.is(typeRefusal(['bin'], 'application/octet-stream', 'blob.bin'), null);
  t.is(typeRefusal(['jpg'], 'image/jpeg', 'a.JPG'), null);
  t.regex(typeRefusal(['pdf'], '', 'data.csv')!, /file_type: "" is not allowed for "data.csv"/);
  t.regex(typeRefusal(['pdf'], '', 'README')!, /is not allowed for "README"/, 'no extension: only * allows it');
  t.regex(typeRefusal(['pdf'], '', '.pdf')!, /is not allowed for ".pdf"/, 'a dot file has no extension');
  t.is(typeRefusal(['*'], '', 'README'), null);
  t.is(typeRefusal(['*'], 'application/pdf', 'index.html'), null, 'an app that takes anything takes it');
});

test('file types: the extension as it is on disk (no trimming, only ASCII folded); Pier\'s parts folder is never a path', (t) => {
  for (const name of ['a.pdf ', 'b.pdf\u3000', 'c.pdf\u00a0', 'e.pdf\uFEFF', 'd.\u212Aey']) t.not(typeRefusal(['pdf', 'key'], '', name), null, JSON.stringify(name));
  t.is(typeRefusal(['pdf', 'key'], '', 'D.KEY'), null);
  t.throws(() => checkRelativePath('.pier-uploads/x.part'), { message: /must not name \.pier-uploads/ });
  t.throws(() => checkRelativePath('a/.pier-uploads/'), { message: /must not name \.pier-uploads/ });
});

import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The unit tier runs one ava worker per folder of test/unit, not one per file: ava's own start-up
 * (its modules loaded afresh in every worker) costs some 0.35 s of CPU per worker, more than most
 * unit files' tests and imports together (docs/performance.md, "The unit tier"). A folder's
 * `suite.ts` imports every `*.test.js` beside it (and in subfolders without a suite of their own),
 * statically: ava takes only the tests declared while the file loads. Every test keeps its own
 * title and assertions; what the files share is the worker.
 *
 * package.json's ava `files` leaves the unit `*.test.js` files out and takes the suites instead;
 * one file still runs on its own when named: `npx ava dist/test/unit/bus/ids.test.js`.
 *
 * A file missing from its folder's suite would not run in the tier: each suite calls this, which
 * declares a test that fails naming every test file of the folder the suite does not import.
 */
export function everyFileGathered(suiteUrl: string): void {
  const suite = fileURLToPath(suiteUrl);
  const folder = dirname(suite);
  // The source folder is the reference: dist/ keeps the output of a test file deleted since.
  const at = folder.lastIndexOf(`${sep}dist${sep}`);
  const source = folder.slice(0, at) + folder.slice(at + 5);
  const imported = new Set([...readFileSync(suite, 'utf8').matchAll(/^import '\.\/([^']+\.test\.js)';$/gm)].map((m) => m[1]));
  const present = testFiles(source, true).map((f) => relative(source, f).split(sep).join('/').replace(/\.ts$/, '.js'));
  const unit = basename(folder);
  test(`the ${unit} suite imports every test file of its folder`, (t) => {
    t.true(present.length > 0);
    t.deepEqual(
      present.filter((f) => !imported.has(f)),
      [],
      `add them to ${relative(process.cwd(), join(source, 'suite.ts'))}`,
    );
    t.deepEqual(
      [...imported].filter((f) => !present.includes(f)),
      [],
      'imported, but no such test file',
    );
  });
}

/** The test sources under `dir`, in name order; a subfolder with a suite of its own is left to it. */
function testFiles(dir: string, top: boolean): string[] {
  const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  if (!top && entries.some((e) => e.isFile() && e.name === 'suite.ts')) return [];
  const files: string[] = [];
  for (const e of entries) {
    if (e.isDirectory()) files.push(...testFiles(join(dir, e.name), false));
    else if (e.isFile() && e.name.endsWith('.test.ts')) files.push(join(dir, e.name));
  }
  return files;
}

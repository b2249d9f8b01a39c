import test from 'ava';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tidyRunFolder } from '../../../chaos/run-folder.js';

// A chaos or upgrade run that passed in a folder of its own keeps its history alone
// (chaos/run-folder.ts); a failed run, `--keep` or `--dir` keep everything.
function runFolder(): { dir: string; outside: string } {
  const dir = mkdtempSync(join(tmpdir(), 'pier-run-folder-'));
  const outside = mkdtempSync(join(tmpdir(), 'pier-run-folder-outside-'));
  writeFileSync(join(outside, 'precious'), 'not the run\'s');
  mkdirSync(join(dir, 'run', 'cluster', 'nats-1', 'jetstream'), { recursive: true });
  writeFileSync(join(dir, 'run', 'history.jsonl'), '{"n":0}\n');
  writeFileSync(join(dir, 'run', 'cluster', 'nats-1', 'jetstream', 'blk'), Buffer.alloc(64 * 1024));
  writeFileSync(join(dir, 'run', 'cluster', 'edge-1.log'), 'log');
  // A link out of the folder (a worktree's node_modules, say) is removed, never followed.
  symlinkSync(outside, join(dir, 'run', 'link-out'));
  return { dir, outside };
}

test('a pass in a folder of its own keeps the history alone, and nothing outside is touched', (t) => {
  const { dir, outside } = runFolder();
  const said = tidyRunFolder(dir, { passed: true, keep: false, madeByRun: true });
  t.true(existsSync(join(dir, 'run', 'history.jsonl')));
  t.is(readFileSync(join(dir, 'run', 'history.jsonl'), 'utf8'), '{"n":0}\n');
  t.false(existsSync(join(dir, 'run', 'cluster')));
  t.false(existsSync(join(dir, 'run', 'link-out')));
  t.is(readFileSync(join(outside, 'precious'), 'utf8'), 'not the run\'s');
  t.regex(said, /history kept/);
  rmSync(dir, { recursive: true });
  rmSync(outside, { recursive: true });
});

test('a failed run, --keep and a folder given with --dir keep everything', (t) => {
  for (const o of [{ passed: false, keep: false, madeByRun: true }, { passed: true, keep: true, madeByRun: true }, { passed: true, keep: false, madeByRun: false }]) {
    const { dir, outside } = runFolder();
    t.regex(tidyRunFolder(dir, o), /kept:/, JSON.stringify(o));
    t.true(existsSync(join(dir, 'run', 'cluster', 'nats-1', 'jetstream', 'blk')), JSON.stringify(o));
    rmSync(dir, { recursive: true });
    rmSync(outside, { recursive: true });
  }
});

import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDurable, mkdirDurable, replaceDurable } from '../../../lib/state/durable-files.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

// Files Pier creates in its data dir (lib/state/durable-files.ts): whole, one value for processes
// starting together, never a draft left behind.
test('createDurable: made once, 0600, whole; a second call keeps the first value and says it did not make it', (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const path = join(dir, 'master.key');
  t.true(createDurable(path, 'first\n'));
  t.false(createDurable(path, 'second\n'));
  t.is(readFileSync(path, 'utf8'), 'first\n');
  t.is(statSync(path).mode & 0o777, 0o600);
  t.deepEqual(readdirSync(dir), ['master.key'], 'no draft left behind');
});

test('hostile: many creators at once agree on one value; an existing file is never overwritten', (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const path = join(dir, 'admin.token');
  const made = Array.from({ length: 50 }, (_, i) => createDurable(path, `value-${i}\n`));
  t.is(made.filter(Boolean).length, 1);
  t.is(readFileSync(path, 'utf8'), `value-${made.indexOf(true)}\n`);
  const kept = join(dir, 'kept');
  writeFileSync(kept, 'operator wrote this');
  t.false(createDurable(kept, 'not this'));
  t.is(readFileSync(kept, 'utf8'), 'operator wrote this');
});

test('replaceDurable swaps the whole file; mkdirDurable makes every missing folder', (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const deep = join(dir, 'a', 'b', 'c');
  mkdirDurable(deep);
  t.true(statSync(deep).isDirectory());
  t.is(statSync(join(dir, 'a')).mode & 0o777, 0o700);
  mkdirDurable(deep); // again: nothing to do, no error
  const path = join(deep, 'anchors');
  replaceDurable(path, 'one', 0o644);
  replaceDurable(path, 'two', 0o644);
  t.is(readFileSync(path, 'utf8'), 'two');
  t.deepEqual(readdirSync(deep), ['anchors']);
  t.false(existsSync(`${path}.draft`));
});

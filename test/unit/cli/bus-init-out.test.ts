import test from 'ava';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { busInitOut, gitWorkTreeOf } from '../../../cli/bus-init-out.js';
import { cleanup, tempDir } from '../../helpers/pier.js';

test('bus init: the default is ~/.pier/bus; a folder inside a git work tree is refused unless forced', (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const repo = join(dir, 'repo');
  mkdirSync(join(repo, '.git'), { recursive: true });
  mkdirSync(join(repo, 'bus'));
  t.is(busInitOut(undefined, false, { HOME: join(dir, 'home') }), join(dir, 'home', '.pier', 'bus'));
  t.is(gitWorkTreeOf(join(repo, 'bus', 'deeper')), repo);
  t.throws(() => busInitOut(join(repo, 'bus'), false, { HOME: dir }), { message: /inside the git work tree .*repo.*--force/ });
  t.is(busInitOut(join(repo, 'bus'), true, { HOME: dir }), join(repo, 'bus'));
  t.is(busInitOut(join(dir, 'elsewhere'), false, {}), join(dir, 'elsewhere'));
  t.throws(() => busInitOut(undefined, false, {}), { message: /give --out/ });
});

test('the repository itself is a work tree: `pier bus init --out ./bus` from a checkout is refused', (t) => {
  t.not(gitWorkTreeOf(join(process.cwd(), 'bus')), null);
});

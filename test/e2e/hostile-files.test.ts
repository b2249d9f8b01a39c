import test from 'ava';
import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

/** Every file and folder under `dir` with its permission bits. */
function modes(dir: string): Array<[string, number, boolean]> {
  const out: Array<[string, number, boolean]> = [];
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(join(dir, name));
    out.push([name, st.mode & 0o777, st.isDirectory()]);
  }
  return out;
}

test('the data dir is 0700 and every file in it 0600 at start, whatever was there before', async (t) => {
  const dir = tempDir();
  const data = join(dir, 'data');
  mkdirSync(data, { mode: 0o755 });
  chmodSync(data, 0o755);
  writeFileSync(join(data, 'admin.token'), 'an-old-admin-token-of-some-length', { mode: 0o644 });
  chmodSync(join(data, 'admin.token'), 0o644);
  const pier = await PierProcess.start(pierEnv(data));
  try {
    // Write something so every store has its files.
    const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
    t.is((await cli(['user', 'add', 'alice'], env)).code, 0);
    t.is(statSync(data).mode & 0o777, 0o700);
    const all = modes(data);
    t.true(all.some(([name]) => name.endsWith('.mdb')), 'the LMDB stores were checked too');
    for (const [name, mode, isDir] of all) t.is(mode, isDir ? 0o700 : 0o600, name);
  } finally {
    await pier.stop();
    cleanup(dir);
  }
});

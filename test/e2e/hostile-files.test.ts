import test from 'ava';
import { chmodSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';

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

test('unfinished uploads per user and app are capped (429); a resume never counts, a finished one frees its place', async (t) => {
  const dir = tempDir();
  const dest = join(dir, 'dest');
  mkdirSync(dest, { recursive: true });
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_UPLOAD_MAX_UNFINISHED: '3' }));
  try {
    const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
    const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
    writeFileSync(join(dir, 'm.yaml'), `metadata: { name: files }\nupload: { fileType: ["*"], dest: ${dest} }\n`);
    t.is((await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'm.yaml')], env)).code, 0);
    const client = new UploadClient(pier.ports!.upload, 'files.alice.localhost', token);
    const create = (name: string) => client.create({ storage_path: dest, file_relative_path: name, file_type: '', file_size: 4 });
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c']) {
      const r = await create(name);
      t.is(r.status, 200);
      ids.push(r.json.data.id);
    }
    const over = await create('d');
    t.deepEqual([over.status, over.json], [429, { code: 1, message: 'too many unfinished uploads for this app (3): finish some, or let them expire' }]);
    t.is((await create('a')).json.data.id, ids[0], 'a resume is answered as ever');
    t.is((await client.patch(ids[0], 0, Buffer.from('done'))).json.message, 'File uploaded successfully');
    t.is((await create('d')).status, 200, 'the finished upload freed its place');
  } finally {
    await pier.stop();
    cleanup(dir);
  }
});

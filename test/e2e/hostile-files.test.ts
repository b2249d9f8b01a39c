import test from 'ava';
import { chmodSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

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
  let pier = await PierProcess.start(pierEnv(data));
  try {
    // Write something so every store has its files.
    const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
    t.is((await cli(['user', 'add', 'alice'], env)).code, 0);
    t.is(statSync(data).mode & 0o777, 0o700);
    // At once, not only after a restart: a store opened after the sweep at start (the edge's gateway
    // history, issue #52) is private from its first byte too.
    const first = modes(data).filter(([name]) => name !== 'files' && !name.startsWith('files/'));
    t.true(first.some(([name]) => name.startsWith('gateway-history/') && name.endsWith('.mdb')), 'the gateway history was checked too');
    for (const [name, mode, isDir] of first) t.is(mode, isDir ? 0o700 : 0o600, `after the first start: ${name}`);
    // Users' files (the default upload root, `<data>/files`) are theirs and the apps': left alone.
    mkdirSync(join(data, 'files', 'alice'), { recursive: true });
    writeFileSync(join(data, 'files', 'alice', 'photo.jpg'), 'x', { mode: 0o644 });
    chmodSync(join(data, 'files', 'alice', 'photo.jpg'), 0o644);
    await pier.stop();
    pier = await PierProcess.start(pier.env);
    const all = modes(data).filter(([name]) => name !== 'files' && !name.startsWith('files/'));
    t.true(all.some(([name]) => name.endsWith('.mdb')), 'the LMDB stores were checked too');
    for (const [name, mode, isDir] of all) t.is(mode, isDir ? 0o700 : 0o600, name);
    t.is(statSync(join(data, 'files', 'alice', 'photo.jpg')).mode & 0o777, 0o644, "a user's file keeps its mode");
  } finally {
    await pier.stop();
    cleanup(dir);
  }
});

test('unfinished uploads per user and app are capped (429); a resume never counts, a finished one frees its place', async (t) => {
  const dir = tempDir();
  const dest = '/dest';
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

test("a manifest cannot reach the data dir or another user's files: dest is in the app's view, per user", async (t) => {
  const dir = tempDir();
  const data = join(dir, 'data');
  const pier = await PierProcess.start(pierEnv(data));
  try {
    const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
    const adminToken = readFileSync(join(data, 'admin.token'), 'utf8');
    const tokens: Record<string, string> = {};
    for (const user of ['alice', 'bob']) tokens[user] = (await cli(['user', 'add', user, '--json'], env)).json.token;
    // The review's attack: dest = Pier's data dir, then an upload named admin.token.
    writeFileSync(join(dir, 'evil.yaml'), `metadata: { name: evil }\nupload: { fileType: ["*"], dest: ${data} }\n`);
    const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'evil.yaml'), '--json'], env);
    t.is(installed.code, 0, installed.stderr);
    t.is(installed.json.uploadDir, join(data, 'files', 'alice', data.slice(1)), 'mapped under alice\'s folder');
    const client = new UploadClient(pier.ports!.upload, 'evil.alice.localhost', tokens.alice);
    const rec = await until('the upload actor knows the app', async () => {
      const r = await client.create({ storage_path: data, file_relative_path: 'admin.token', file_type: '', file_size: 6 });
      return r.status === 200 ? r.json.data : undefined;
    });
    t.is(rec.storage_path, data, "answers keep the app's view");
    t.is((await client.patch(rec.id, 0, Buffer.from('owned!'))).json.message, 'File uploaded successfully');
    t.is(readFileSync(join(data, 'admin.token'), 'utf8'), adminToken, 'the real admin token is untouched');
    t.is(readFileSync(join(installed.json.uploadDir, 'admin.token'), 'utf8'), 'owned!', "the file landed in alice's folder");

    // `..` in dest is refused at install, naming the field.
    writeFileSync(join(dir, 'climb.yaml'), 'metadata: { name: climb }\nupload: { fileType: ["*"], dest: /data/../../bob }\n');
    const climb = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'climb.yaml')], env);
    t.not(climb.code, 0);
    t.regex(climb.stderr, /upload\.dest: must be an absolute path without \.\. segments/);

    // Two users, one manifest: each has their own file at the same app path.
    writeFileSync(join(dir, 'same.yaml'), 'metadata: { name: same }\nupload: { fileType: ["*"], dest: /data/same }\n');
    for (const user of ['alice', 'bob']) {
      t.is((await cli(['app', 'install', '--user', user, '--manifest', join(dir, 'same.yaml')], env)).code, 0);
      const c = new UploadClient(pier.ports!.upload, `same.${user}.localhost`, tokens[user]);
      const r = await until(`${user}'s upload is created`, async () => {
        const x = await c.create({ storage_path: '/data/same', file_relative_path: 'report.txt', file_type: '', file_size: user.length });
        return x.status === 200 ? x.json.data : undefined;
      });
      t.is((await c.patch(r.id, 0, Buffer.from(user))).json.message, 'File uploaded successfully');
    }
    for (const user of ['alice', 'bob']) t.is(readFileSync(join(data, 'files', user, 'data', 'same', 'report.txt'), 'utf8'), user);
  } finally {
    await pier.stop();
    cleanup(dir);
  }
});

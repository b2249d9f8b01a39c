import test from 'ava';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

// docs/protocol.md "Upload" (amended 2026-11-23): "Two apps of one user whose `dest` folders nest (one
// inside the other, or `dest: /`) are refused at install (409 naming the other app) unless the
// operator passes `--shared-dest`, which says the two apps trust each other."

/** One `pier start` (in-process bus) for the whole file; each test has its own user. */
let pier: PierProcess;
let dir: string;
let env: Record<string, string>;

test.before(async () => {
  dir = tempDir();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
});

test.after.always(async () => {
  await pier?.stop();
  cleanup(dir);
});

const ASK = 'install with --shared-dest if the two apps trust each other';

/** A manifest file for app `name` with an upload section at `dest` (none when null). */
function manifest(name: string, dest: string | null): string {
  const file = join(dir, `${name}-${dest === null ? 'none' : dest.replace(/\W/g, '_')}.yaml`);
  writeFileSync(file, `metadata: { name: ${name} }\n${dest === null ? '' : `upload: { fileType: ["*"], dest: "${dest}" }\n`}`);
  return file;
}

async function addUser(name: string): Promise<void> {
  const r = await cli(['user', 'add', name, '--json'], env);
  if (r.code !== 0) throw new Error(`user add ${name}: ${r.stderr}`);
}

const install = (user: string, name: string, dest: string | null, ...extra: string[]) => cli(['app', 'install', '--user', user, '--manifest', manifest(name, dest), '--json', ...extra], env);

async function appsOf(user: string): Promise<Array<{ app: string; sharedDest: boolean }>> {
  const r = await cli(['app', 'list', '--user', user, '--json'], env);
  if (r.code !== 0) throw new Error(`app list: ${r.stderr}`);
  return (r.json as Array<{ app: string; sharedDest: boolean }>).map((a) => ({ app: a.app, sharedDest: a.sharedDest }));
}

test('an app inside an installed app\'s dest is refused: non-zero exit, one line naming the other app, 409, nothing installed', async (t) => {
  await addUser('alice');
  const files = await install('alice', 'files', '/data');
  t.is(files.code, 0, files.stderr);
  const chat = await install('alice', 'chat', '/data/chat');
  t.not(chat.code, 0);
  t.is(chat.stdout, '');
  t.deepEqual(JSON.parse(chat.stderr).error, { status: 409, code: 'CONFLICT', message: `upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": ${ASK} (409)` });
  t.deepEqual(await appsOf('alice'), [{ app: 'files', sharedDest: false }]);
});

test('the reverse order is refused too: an app around an installed one', async (t) => {
  await addUser('bob');
  t.is((await install('bob', 'chat', '/data/chat')).code, 0);
  const files = await install('bob', 'files', '/data/');
  t.not(files.code, 0);
  t.deepEqual(JSON.parse(files.stderr).error, { status: 409, code: 'CONFLICT', message: `upload.dest "/data" of app "files" encloses "/data/chat" of app "chat": ${ASK} (409)` });
  t.deepEqual(await appsOf('bob'), [{ app: 'chat', sharedDest: false }]);
});

test('dest: / is refused even alone; with --shared-dest it installs, creates the folder and is listed as shared', async (t) => {
  await addUser('carol');
  const refused = await install('carol', 'all', '/');
  t.not(refused.code, 0);
  t.regex(JSON.parse(refused.stderr).error.message, /^upload\.dest "\/" of app "all" encloses the user's whole folder.*--shared-dest.* \(409\)$/);
  const shared = await install('carol', 'all', '/', '--shared-dest');
  t.is(shared.code, 0, shared.stderr);
  t.true(statSync(shared.json.uploadDir).isDirectory(), 'the install created the folder');
  // A newcomer inside it is refused, naming "all", until the operator vouches for it too.
  const chat = await install('carol', 'chat', '/data/chat');
  t.deepEqual(JSON.parse(chat.stderr).error, { status: 409, code: 'CONFLICT', message: `upload.dest "/" of app "all" encloses "/data/chat" of app "chat": ${ASK} (409)` });
  t.is((await install('carol', 'chat', '/data/chat', '--shared-dest')).code, 0);
  t.deepEqual(await appsOf('carol'), [{ app: 'all', sharedDest: true }, { app: 'chat', sharedDest: true }]);
});

test('--shared-dest accepts nested dests; each app gets its own folder', async (t) => {
  await addUser('dave');
  const files = await install('dave', 'files', '/data');
  const chat = await install('dave', 'chat', '/data/chat', '--shared-dest');
  t.is(chat.code, 0, chat.stderr);
  t.is(chat.json.uploadDir, join(files.json.uploadDir, 'chat'));
  t.deepEqual(await appsOf('dave'), [{ app: 'chat', sharedDest: true }, { app: 'files', sharedDest: false }]);
});

test('apps of different users with the same dest are fine; /database beside /data is fine', async (t) => {
  await addUser('erin');
  await addUser('frank');
  for (const user of ['erin', 'frank']) {
    const r = await install(user, 'files', '/data');
    t.is(r.code, 0, `${user}: ${r.stderr}`);
  }
  const db = await install('erin', 'db', '/database');
  t.is(db.code, 0, db.stderr);
  t.deepEqual((await appsOf('erin')).map((a) => a.app), ['db', 'files']);
});

test('an app with no upload section is never refused for this, even beside dest: /', async (t) => {
  await addUser('gina');
  t.is((await install('gina', 'all', '/', '--shared-dest')).code, 0);
  const notes = await install('gina', 'notes', null);
  t.is(notes.code, 0, notes.stderr);
  t.is(notes.json.uploadDir, null);
  t.deepEqual(await appsOf('gina'), [{ app: 'all', sharedDest: true }, { app: 'notes', sharedDest: false }]);
});

test('the admin API takes sharedDest as a boolean and nothing else (400)', async (t) => {
  await addUser('hugo');
  const token = readFileSync(join(dir, 'data', 'admin.token'), 'utf8').trim();
  const res = await fetch(`${pier.adminUrl}/admin/v1/apps`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'hugo', manifest: 'metadata: { name: all }\nupload: { fileType: ["*"], dest: / }\n', sharedDest: 'yes' }),
  });
  t.is(res.status, 400);
  t.regex((await res.json()).message, /sharedDest: must be a boolean/);
  t.deepEqual(await appsOf('hugo'), []);
});

import test, { type ExecutionContext } from 'ava';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, closeSync, constants, fdatasyncSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, readlinkSync, renameSync, statSync, symlinkSync, truncateSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { LossyFs } from '../helpers/lossy-fs.js';
import { cleanup, ROOT, tempDir } from '../helpers/pier.js';
import { within } from '../helpers/wait.js';

// The power-cut layer of issue #54 (powercut/README.md), shown faithful case by case: after a cut
// the mount holds exactly what was synced — file data by an fsync of the file, names by an fsync of
// their folder — and nothing else.

const run = promisify(execFile);

const maybe = LossyFs.testsHere('lossy-fs', test, test.skip);

/** A fresh backing folder mounted lossy, unmounted and removed when the test ends. */
async function lossyMount(t: ExecutionContext, options: { journal?: boolean } = {}): Promise<{ fs: LossyFs; at: (...p: string[]) => string }> {
  const dir = tempDir('pier-lossy-');
  mkdirSync(join(dir, 'backing'));
  mkdirSync(join(dir, 'mnt'));
  writeFileSync(join(dir, 'backing', 'before.txt'), 'there before the mount');
  const fs = await LossyFs.mount(join(dir, 'backing'), join(dir, 'mnt'), options);
  t.teardown(async () => {
    await fs.unmount();
    cleanup(dir);
  });
  return { fs, at: (...p) => join(fs.mountDir, ...p) };
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` at `offset` of an existing file, without syncing. */
function writeAt(path: string, data: string | Buffer, offset: number, sync = false): void {
  const fd = openSync(path, 'r+');
  writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data, 0, data.length, offset);
  if (sync) fsyncSync(fd);
  closeSync(fd);
}

/** Creates (or replaces) `path` with `data` and fsyncs the file (not its folder). */
function writeSynced(path: string, data: string | Buffer): void {
  const fd = openSync(path, 'w');
  writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
  fsyncSync(fd);
  closeSync(fd);
}

maybe('what was in the backing folder at the mount is durable; a write not fsync\'d is read back, then lost at a cut', async (t) => {
  const { fs, at } = await lossyMount(t);
  t.is(readFileSync(at('before.txt'), 'utf8'), 'there before the mount');
  writeFileSync(at('before.txt'), 'overwritten, never synced');
  t.is(readFileSync(at('before.txt'), 'utf8'), 'overwritten, never synced', 'reads see the live state');
  await fs.cut();
  t.is(readFileSync(at('before.txt'), 'utf8'), 'there before the mount');
  t.is(readFileSync(join(fs.backingDir, 'before.txt'), 'utf8'), 'there before the mount', 'the backing folder is the durable state too');
});

maybe('an fsync\'d write survives a cut', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeSynced(at('before.txt'), 'synced');
  await fs.cut();
  t.is(readFileSync(at('before.txt'), 'utf8'), 'synced');
});

maybe('a write after an fsync is lost while the synced content around it stays: only the unsynced range reverts', async (t) => {
  const { fs, at } = await lossyMount(t);
  const page = (c: string) => Buffer.alloc(4096, c);
  writeSynced(at('before.txt'), Buffer.concat([page('a'), page('a'), page('a')]));
  writeAt(at('before.txt'), page('b'), 4096, true);
  writeAt(at('before.txt'), Buffer.alloc(100, 'c'), 100);
  writeAt(at('before.txt'), Buffer.alloc(10, 'd'), 12_288); // past the end, unsynced
  t.is(statSync(at('before.txt')).size, 12_298);
  await fs.cut();
  t.deepEqual(readFileSync(at('before.txt')), Buffer.concat([page('a'), page('b'), page('a')]));
});

maybe('an unsynced truncate or extend reverts; a truncate then extend that was fsync\'d stays as synced', async (t) => {
  const { fs, at } = await lossyMount(t);
  const content = Buffer.from('0123456789'.repeat(1000));
  writeSynced(at('before.txt'), content);
  truncateSync(at('before.txt'), 10);
  writeSynced(at('other.txt'), 'x');
  fsyncPath(fs.mountDir);
  truncateSync(at('other.txt'), 50_000);
  await fs.cut();
  t.deepEqual(readFileSync(at('before.txt')), content, 'the truncate is undone');
  t.is(readFileSync(at('other.txt'), 'utf8'), 'x', 'the extension is undone');

  // Cut short, grown again (zeros), then fsync'd: the zeros are what is durable, not the old bytes.
  truncateSync(at('before.txt'), 10);
  truncateSync(at('before.txt'), 10_000);
  fsyncPath(at('before.txt'));
  await fs.cut();
  t.deepEqual(readFileSync(at('before.txt')), Buffer.concat([content.subarray(0, 10), Buffer.alloc(9_990)]));
});

maybe('a file created and fsync\'d is gone after a cut when its folder was not fsync\'d; kept when it was', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeSynced(at('orphan.txt'), 'synced data, unsynced name');
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['before.txt']);

  writeSynced(at('named.txt'), 'synced data and name');
  writeFileSync(at('empty.txt'), 'name synced, data not');
  fsyncPath(fs.mountDir);
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir).sort(), ['before.txt', 'empty.txt', 'named.txt']);
  t.is(readFileSync(at('named.txt'), 'utf8'), 'synced data and name');
  t.is(readFileSync(at('empty.txt'), 'utf8'), '', 'a name whose data was never synced is an empty file');
});

maybe('with --journal (names as ext4 or XFS keep them): an fsync of any file commits every name change made before it, in every folder; an fdatasync none; data stays per file', async (t) => {
  const { fs, at } = await lossyMount(t, { journal: true });
  mkdirSync(at('d'));
  mkdirSync(at('d', 'e'));
  writeFileSync(at('d', 'name-only.txt'), 'name committed, data never synced');
  renameSync(at('before.txt'), at('d', 'e', 'moved.txt'));
  writeSynced(at('d', 'e', 'new.txt'), 'synced, its folder never fsync\'d');
  writeFileSync(at('later.txt'), 'made after the last fsync');
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['d']);
  t.deepEqual(readdirSync(at('d')).sort(), ['e', 'name-only.txt']);
  t.deepEqual(readdirSync(at('d', 'e')).sort(), ['moved.txt', 'new.txt']);
  t.is(readFileSync(at('d', 'e', 'new.txt'), 'utf8'), 'synced, its folder never fsync\'d');
  t.is(readFileSync(at('d', 'e', 'moved.txt'), 'utf8'), 'there before the mount');
  t.is(readFileSync(at('d', 'name-only.txt'), 'utf8'), '', 'its name committed with the others, its data never synced');

  // An fdatasync commits no names here (ext4 commits its journal at one when the file's size or blocks changed: the model keeps less, never more).
  writeFileSync(at('x.txt'), 'x');
  const fd = openSync(at('d', 'e', 'new.txt'), 'r+');
  fdatasyncSync(fd);
  closeSync(fd);
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['d']);
});

maybe('a rename over a file without an fsync of the folder reverts to the old name and content; with it, the replace stays', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeSynced(at('before.txt'), 'v1');
  writeSynced(at('next.tmp'), 'v2');
  renameSync(at('next.tmp'), at('before.txt'));
  t.is(readFileSync(at('before.txt'), 'utf8'), 'v2');
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['before.txt']);
  t.is(readFileSync(at('before.txt'), 'utf8'), 'v1');

  // The atomic-replace idiom: write, fsync the file, rename, fsync the folder.
  writeSynced(at('next.tmp'), 'v2');
  renameSync(at('next.tmp'), at('before.txt'));
  fsyncPath(fs.mountDir);
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['before.txt']);
  t.is(readFileSync(at('before.txt'), 'utf8'), 'v2');
});

maybe('a move between folders lands whole (gone from one, in the other) when either folder is fsync\'d, and not before', async (t) => {
  const { fs, at } = await lossyMount(t);
  mkdirSync(at('a'));
  mkdirSync(at('b'));
  mkdirSync(at('c'));
  writeSynced(at('a', 'f'), 'f');
  writeSynced(at('a', 'g'), 'g');
  for (const d of ['a', 'b', 'c', '']) fsyncPath(at(d));
  renameSync(at('a', 'f'), at('b', 'f'));
  renameSync(at('a', 'g'), at('c', 'g'));
  fsyncPath(at('b')); // the destination of f's move
  fsyncPath(at('a')); // the source of g's move: g lands in c, though c was not fsync'd
  renameSync(at('b', 'f'), at('c', 'f')); // not synced: f stays in b
  await fs.cut();
  t.deepEqual([readdirSync(at('a')), readdirSync(at('b')), readdirSync(at('c'))], [[], ['f'], ['g']]);
  t.is(readFileSync(at('c', 'g'), 'utf8'), 'g');
});

maybe('an unlink without an fsync of the folder reverts; with it, the file is gone', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeSynced(at('before.txt'), 'synced');
  unlinkSync(at('before.txt'));
  await fs.cut();
  t.is(readFileSync(at('before.txt'), 'utf8'), 'synced');
  unlinkSync(at('before.txt'));
  fsyncPath(fs.mountDir);
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), []);
});

maybe('mkdir, symlink and link without an fsync of their parent are gone at a cut; with it they stay', async (t) => {
  const { fs, at } = await lossyMount(t);
  mkdirSync(at('dir'));
  writeSynced(at('dir', 'inside'), 'x');
  fsyncPath(at('dir')); // the folder's own entries are synced, but its name in the root is not
  symlinkSync('before.txt', at('link'));
  linkSync(at('before.txt'), at('hard'));
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir), ['before.txt']);
  t.is(statSync(at('before.txt')).nlink, 1);

  mkdirSync(at('dir'));
  symlinkSync('before.txt', at('link'));
  linkSync(at('before.txt'), at('hard'));
  fsyncPath(fs.mountDir);
  await fs.cut();
  t.deepEqual(readdirSync(fs.mountDir).sort(), ['before.txt', 'dir', 'hard', 'link']);
  t.is(readlinkSync(at('link')), 'before.txt');
  t.is(statSync(at('hard')).ino, statSync(at('before.txt')).ino, 'a hard link is one file under two names');
});

maybe('a chmod is durable at an fsync of the file or folder it changed (not at fdatasync); otherwise it reverts', async (t) => {
  const { fs, at } = await lossyMount(t);
  mkdirSync(at('dir'), 0o755);
  fsyncPath(fs.mountDir);
  const mode = (p: string) => statSync(p).mode & 0o777;
  const before = mode(at('before.txt'));
  chmodSync(at('before.txt'), 0o600);
  chmodSync(at('dir'), 0o700);
  const fd = openSync(at('before.txt'), 'r');
  fdatasyncSync(fd);
  closeSync(fd);
  await fs.cut();
  t.deepEqual([mode(at('before.txt')), mode(at('dir'))], [before, 0o755]);
  chmodSync(at('before.txt'), 0o600);
  chmodSync(at('dir'), 0o700);
  fsyncPath(at('before.txt'));
  fsyncPath(at('dir'));
  await fs.cut();
  t.deepEqual([mode(at('before.txt')), mode(at('dir'))], [0o600, 0o700]);
});

maybe('a write through an O_DSYNC file is durable when write() returns, and only its range', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeSynced(at('before.txt'), Buffer.alloc(8192, 'a'));
  const plain = openSync(at('before.txt'), 'r+');
  writeSync(plain, Buffer.alloc(10, 'p'), 0, 10, 0); // unsynced; the O_DSYNC write's fsync must not carry it
  const dsync = openSync(at('before.txt'), constants.O_RDWR | constants.O_DSYNC);
  writeSync(dsync, Buffer.alloc(10, 's'), 0, 10, 4096);
  closeSync(dsync);
  closeSync(plain);
  await fs.cut();
  const expected = Buffer.alloc(8192, 'a');
  expected.fill('s', 4096, 4106);
  t.deepEqual(readFileSync(at('before.txt')), expected);
});

maybe('sync(2) and syncfs of the mount make nothing durable: the kernel does not forward them to a FUSE daemon', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeFileSync(at('before.txt'), 'written, then sync and sync -f');
  await run('sync', []); // run, not execFileSync: a sync of the whole machine may take a while, the other tests' clocks run on
  await run('sync', ['-f', at('before.txt')]);
  await fs.cut();
  t.is(readFileSync(at('before.txt'), 'utf8'), 'there before the mount');
});

maybe('a cut while a file is open is refused, naming the file; nothing changes; closed, it cuts', async (t) => {
  const { fs, at } = await lossyMount(t);
  writeFileSync(at('before.txt'), 'unsynced');
  const fd = openSync(at('before.txt'), 'r');
  try {
    await t.throwsAsync(fs.cut({ waitForCloseMs: 0 }), { message: /cut refused: 1 file\(s\) still open on the mount after 0 ms \(.*before\.txt\)/ });
    t.is(readFileSync(at('before.txt'), 'utf8'), 'unsynced');
    t.deepEqual((await fs.status()).open, [join(fs.backingDir, 'before.txt')]);
  } finally {
    closeSync(fd);
  }
  await fs.cut();
  t.is(readFileSync(at('before.txt'), 'utf8'), 'there before the mount');
});

// --- LMDB, as Pier's stores use it (lmdb-js, default overlappingSync), in a process killed at the cut ---

type LmdbJob = { path: string; options?: Record<string, unknown>; fsync?: string[]; puts?: Record<string, string>; flushed?: boolean; read?: string[]; hold?: boolean };

const LMDB_CHILD = `
import { open } from 'lmdb';
import { closeSync, fsyncSync, openSync } from 'node:fs';
const job = JSON.parse(process.env.LMDB_JOB);
const db = open({ path: job.path, compression: false, ...job.options });
for (const d of job.fsync ?? []) { const fd = openSync(d, 'r'); fsyncSync(fd); closeSync(fd); }
for (const [k, v] of Object.entries(job.puts ?? {})) { await db.put(k, v); if (job.flushed) await db.flushed; }
process.stdout.write(JSON.stringify(Object.fromEntries((job.read ?? []).map((k) => [k, db.get(k) ?? null]))) + '\\n');
if (job.hold) setInterval(() => {}, 60_000); else await db.close();
`;

/**
 * Runs `job` in a node process with lmdb-js; answers what it read once its puts are acknowledged.
 * A `hold` job is then SIGKILLed, as a power cut stops it: no close, no last flush.
 */
async function lmdb(job: LmdbJob): Promise<Record<string, string | null>> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', LMDB_CHILD], { cwd: ROOT, env: { ...process.env, LMDB_JOB: JSON.stringify(job) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve)); // after its output: 'exit' may come first
  const line = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(out.split('\n')[0]);
    });
    exited.then((code) => reject(new Error(`the lmdb child exited (${code}) before answering: ${err.trim()}`)));
  });
  const answer = JSON.parse(await within(`the lmdb child to acknowledge its puts on ${job.path}`, line, 20_000));
  if (job.hold) child.kill('SIGKILL');
  await within('the lmdb child to exit', exited, 10_000);
  return answer;
}

maybe('LMDB: puts awaited with `flushed` survive a cut of the killed process that made them (the folder fsync\'d after the open)', async (t) => {
  const { fs, at } = await lossyMount(t);
  const path = at('store');
  t.deepEqual(await lmdb({ path, fsync: [path, fs.mountDir], puts: { a: 'acknowledged' }, flushed: true, read: ['a'], hold: true }), { a: 'acknowledged' });
  await fs.cut();
  t.deepEqual(await lmdb({ path, read: ['a'] }), { a: 'acknowledged' });
  // Again in the environment that now exists: commits rewrite its pages in place (only the changed
  // ranges of data.mdb are copied at each fdatasync), a transaction each, the process killed after.
  const puts = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}`, `value ${i} `.repeat(1 + (i % 50))]));
  await lmdb({ path, puts, flushed: true, hold: true });
  await fs.cut();
  t.deepEqual(await lmdb({ path, read: ['a', ...Object.keys(puts)] }), { a: 'acknowledged', ...puts });
});

maybe('LMDB: with noSync an acknowledged put is lost at a cut; what was synced before stays', async (t) => {
  const { fs, at } = await lossyMount(t);
  const path = at('store');
  await lmdb({ path, fsync: [path, fs.mountDir], puts: { kept: 'synced' }, flushed: true });
  t.deepEqual(await lmdb({ path, options: { noSync: true }, puts: { lost: 'acknowledged, never synced' }, read: ['kept', 'lost'], hold: true }), { kept: 'synced', lost: 'acknowledged, never synced' });
  await fs.cut();
  t.deepEqual(await lmdb({ path, read: ['kept', 'lost'] }), { kept: 'synced', lost: null });
});

maybe('LMDB: a new environment whose folder was never fsync\'d loses its files at a cut, flushed puts and all', async (t) => {
  // lmdb-js syncs its data file, never the folder that names it: on a strict disk the names are
  // lost (ext4 with its journal would in practice keep them). The store's owner must fsync the folder.
  const { fs, at } = await lossyMount(t);
  const path = at('store');
  mkdirSync(path);
  fsyncPath(fs.mountDir);
  t.deepEqual(await lmdb({ path, puts: { a: 'acknowledged' }, flushed: true, read: ['a'], hold: true }), { a: 'acknowledged' });
  await fs.cut();
  t.deepEqual(readdirSync(path), []);
  t.false(existsSync(join(path, 'data.mdb')));
});

import test from 'ava';
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';

// Logs an operator can use: the operator's changes are logged at info (never a body: tokens and
// secrets live there), and PIER_LOG_FORMAT=pretty reads as lines for a person at a terminal.
test('admin actions are logged at info with method, path and status, and no token or value', async (t) => {
  const dir = tempDir();
  const pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  t.teardown(async () => {
    await pier.stop();
    cleanup(dir);
  });
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token as string;
  await cli(['user', 'revoke', 'alice'], env);
  await until('the two admin actions in the log', () => pier.logs.split('"msg":"admin action"').length === 3);
  const lines = pier.logs.split('\n').filter((l) => l.includes('"msg":"admin action"')).map((l) => JSON.parse(l));
  t.deepEqual(lines.map((l) => [l.level, l.admin, l.status]), [
    [30, 'POST /admin/v1/users', 200],
    [30, 'POST /admin/v1/users/alice/revoke', 200],
  ]);
  t.false(pier.logs.includes(token), 'the token is in no log line');
});

test('PIER_LOG_FORMAT=pretty: time, level, message and fields on one line; a bad value stops the start', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const proc = spawn(process.execPath, [BIN, 'start'], { env: pierEnv(join(dir, 'data'), { PIER_LOG_FORMAT: 'pretty' }), stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => void proc.kill('SIGKILL'));
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  await until('pier ready, pretty', () => /^\d\d:\d\d:\d\d\.\d{3} INFO  pier ready  roles=/m.test(out), 20_000);
  t.false(out.split('\n').some((l) => l.startsWith('{')), 'no JSON line');
  const bad = spawn(process.execPath, [BIN, 'start'], { env: pierEnv(join(dir, 'data2'), { PIER_LOG_FORMAT: 'yaml' }), stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  bad.stderr!.on('data', (d) => (err += d));
  const code = await within('the start with a bad PIER_LOG_FORMAT to stop', new Promise<number | null>((r) => bad.on('exit', r)));
  t.is(code, 1);
  t.is(err, 'pier: PIER_LOG_FORMAT: must be json or pretty, got "yaml"\n');
});

// Issue #53: `npm start > file` (npm's own lines first, stderr beside: `2>&1`), then a stop. The
// stop's `pier: SIGTERM: stopping` line was written over the file's first log line: the logs went to
// a second opening of the file, whose writes the shell's descriptor (npm's, stderr's) never saw.
test('a start whose output goes to a file (`> file 2>&1`) keeps every line whole through its stop', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const file = join(dir, 'pier.log');
  // As the shell's `>` and npm do: one opening of the file for stdout and stderr, npm's header first.
  const out = openSync(file, 'w');
  writeSync(out, '> pier start\n\n');
  const proc = spawn(process.execPath, [BIN, 'start'], { env: pierEnv(join(dir, 'data')), stdio: ['ignore', out, out] });
  closeSync(out);
  t.teardown(() => void proc.kill('SIGKILL'));
  const read = () => readFileSync(file, 'utf8');
  await until('pier ready, in the file', () => read().includes('"pier ready"'), 20_000);
  proc.kill('SIGTERM');
  await within('the stopped start to exit', new Promise((r) => proc.on('exit', r)), 20_000);
  // The last lines go through the relay's `cat` (a file opened without O_APPEND): on a busy machine it may write them a while after the exit.
  await until('the last log line in the file', () => read().includes('"pier stopped"'), 30_000);
  const lines = read().split('\n').filter((l) => l !== '');
  t.is(lines[0], '> pier start', 'the line before the start is untouched');
  const whole = (l: string) => {
    try {
      return typeof JSON.parse(l).msg === 'string';
    } catch {
      return /^pier: SIGTERM: stopping \(within \d+ ms; a second signal stops at once\)$/.test(l);
    }
  };
  t.deepEqual(lines.slice(1).filter((l) => !whole(l)), [], `every line a whole log line or the stop's own:\n${read()}`);
  t.true(lines.some((l) => l.startsWith('pier: SIGTERM: stopping')), 'the stop said so');
  t.is(JSON.parse(lines[1]).level, 30, 'the first log line, whole');
});

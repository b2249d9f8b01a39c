import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fixedPorts, ROOT } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';

// `npm run example:chat` as a newcomer runs it: Pier on the PIER_*_PORT given, its logs in a file
// (not swallowed), and nothing left behind in data/example-chat after Ctrl-C.
test('the example chat honours PIER_*_PORT, logs Pier to a file, and removes its run folder on Ctrl-C', async (t) => {
  const ports = await fixedPorts();
  const base = join(ROOT, 'data', 'example-chat');
  const before = existsSync(base) ? readdirSync(base) : [];
  // A process group of its own, as a terminal's foreground job: Ctrl-C is a SIGINT to the whole group.
  const proc = spawn(process.execPath, [join(ROOT, 'examples', 'chat', 'run.mjs')], { env: { ...process.env, ...ports }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  t.teardown(() => {
    try {
      process.kill(-proc.pid!, 'SIGKILL');
    } catch {
      // Already gone.
    }
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  await until('the example to say it is running', () => out.includes('Pier chat is running'), 30_000);
  t.is((await fetch(`http://127.0.0.1:${ports.PIER_ADMIN_PORT}/healthz`)).status, 200, 'the admin listener is on the port given');
  const logFile = /its log: (\S+pier\.log)/.exec(out)?.[1];
  t.truthy(logFile, out);
  t.regex(readFileSync(logFile!, 'utf8'), /"msg":"pier ready"/);
  const runDir = /Pier's data: (\S+)/.exec(out)![1];
  t.true(existsSync(runDir));
  const exited = within('the example to exit', new Promise<number | null>((r) => proc.once('exit', (code) => r(code))), 30_000);
  process.kill(-proc.pid!, 'SIGINT');
  t.is(await exited, 0);
  // Pier heard one signal and stopped cleanly: Ctrl-C is not taken for a second, forced stop.
  t.regex(out, /pier: SIGTERM: stopping/);
  t.notRegex(out, /again: stopping now|SIGINT: stopping/);
  t.false(existsSync(runDir), 'the run folder is gone');
  t.deepEqual(existsSync(base) ? readdirSync(base) : [], before);
});

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

/** The processes under `pid` (children, theirs...), each with its command line, from /proc. */
function descendants(pid: number): Map<number, string> {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Field 4 of stat, after the command name in parentheses (which may hold spaces).
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  const out = new Map<number, string>();
  const walk = (p: number) => {
    for (const [child, parent] of parents) {
      if (parent !== p || out.has(child)) continue;
      out.set(child, alive(child) ? readFileSync(`/proc/${child}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() : '');
      walk(child);
    }
  };
  walk(pid);
  return out;
}

/** Running: it exists and is not a zombie (an exited child whose parent has not reaped it yet). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

// Issue #53: `kill <pid of npm>` reached the shell npm runs the script in, not the example, which ran
// on with its three children (Pier and the two apps). The example takes its parent's end as a stop.
test('`kill <pid of npm>` of `npm run example:chat` stops the example, Pier and both apps, and removes the run folder', async (t) => {
  const ports = await fixedPorts();
  const npm = spawn('npm', ['run', 'example:chat'], { cwd: ROOT, env: { ...process.env, ...ports }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let under = new Map<number, string>();
  t.teardown(() => {
    for (const pid of [npm.pid!, ...under.keys()]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  });
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  // npm runs the build check first (scripts/ensure-build.js): a moment when nothing changed.
  await until('the example to say it is running', () => out.includes('Pier chat is running'), 90_000);
  const runDir = /Pier's data: (\S+)/.exec(out)![1];
  under = descendants(npm.pid!);
  const commands = [...under.values()];
  for (const script of ['examples/chat/run.mjs', 'bin/pier.js start', 'examples/chat/app.mjs', 'examples/chat/quotes-provider.mjs']) {
    t.true(commands.some((c) => c.includes(script)), `${script} runs under npm: ${commands.join('; ')}`);
  }
  process.kill(npm.pid!, 'SIGTERM');
  const left = () => [...under].filter(([pid]) => alive(pid)).map(([pid, c]) => `${pid} ${c}`);
  await until('every process npm started to end', () => left().length === 0, 30_000).catch(() => undefined);
  t.deepEqual(left(), [], 'nothing npm started runs on');
  t.false(existsSync(runDir), 'the run folder is gone: the example stopped as at Ctrl-C');
  t.notRegex(out, /again: stopping now/, 'Pier stopped once, cleanly');
});

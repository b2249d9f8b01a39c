import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freeLoopbackPort } from '../helpers/nats-server.js';
import { cleanup, fixedPorts, ROOT, tempDir } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';
import { connect } from '../helpers/ws-client.js';

// The README's "Scaling out" as a reader runs it (issue: the first hour): the blocks marked
// `sh cluster` start nats-server and every role as its own process, wait until all run, and then run
// the example app on that cluster; a browser's calls go through it (the edge, the bus, the callback
// replica, the vault, the provider). The blocks take their ports and their bus folder from
// variables with the README's defaults: here free ports and a temporary home.

const blocks = (() => {
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```sh cluster') continue;
    const end = lines.indexOf('```', i + 1);
    out.push(lines.slice(i + 1, end).join('\n'));
    i = end;
  }
  return out;
})();

// `npm run build` has run (npm test builds first); `node bin/pier.js` and `npm run example:chat` are this checkout's.
const SHIMS = [
  'npm() { if [ "$1" = run ] && [ "$2" = build ]; then return 0; fi; if [ "$1" = run ] && [ "$2" = example:chat ]; then shift 3; command node "$ROOT/examples/chat/run.mjs" "$@"; return; fi; command npm "$@"; }',
  'node() { if [ "$1" = bin/pier.js ]; then shift; command node "$ROOT/bin/pier.js" "$@"; else command node "$@"; fi; }',
].join('\n');

interface Shell {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}


/** A bash running `script` in a process group of its own (its background jobs too), as a terminal would. */
function shell(script: string, cwd: string, env: Record<string, string>): Shell {
  const proc = spawn('bash', ['-euo', 'pipefail', '-c', `${SHIMS}\n${script}`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  return { proc, out: () => out, exited: new Promise((r) => proc.once('exit', (code) => r(code))) };
}

const killGroup = (s: Shell, signal: NodeJS.Signals) => {
  try {
    process.kill(-s.proc.pid!, signal);
  } catch {
    // Gone already.
  }
};

test('the README cluster section runs as written, and the example app works through the cluster', async (t) => {
  t.timeout(240_000);
  t.is(blocks.length, 2, 'the README has the cluster block and the example block');
  const dir = tempDir();
  const home = join(dir, 'home');
  mkdirSync(home);
  const ports = await fixedPorts();
  // Nothing of this machine's Pier or NATS settings leaks in: the reader's shell has none.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(PIER_|NATS_)/.test(k))) as Record<string, string>;
  const env = { ...inherited, HOME: home, ROOT, NATS_PORT: String(await freeLoopbackPort()), ...ports };
  // One terminal: the cluster block, then the example block in the same shell (it keeps running).
  const reader = shell(`${blocks[0]}\necho "CLUSTER BLOCK DONE"\n${blocks[1]}`, dir, env);
  let ended: number | null | undefined;
  void reader.exited.then((code) => (ended = code));
  t.teardown(async () => {
    if (!t.passed) t.log(`the reader's terminal:\n${reader.out()}`);
    killGroup(reader, 'SIGTERM');
    await within("the terminal's processes to stop", reader.exited, 15_000).catch(() => undefined);
    killGroup(reader, 'SIGKILL');
    cleanup(dir);
  });
  const step = (what: string, seen: () => boolean, timeoutMs: number) =>
    until(what, () => {
      if (seen()) return true;
      if (ended !== undefined) throw new Error(`the terminal ended (${ended}) before ${what}`);
      return undefined;
    }, timeoutMs);
  await step('the cluster block to finish (pier status --wait 30 at its end)', () => reader.out().includes('CLUSTER BLOCK DONE'), 120_000);
  t.regex(reader.out(), /roles: admin, callback, edge, provider, registry, token, upload, vault/);
  t.notRegex(reader.out(), /MISSING/);
  // Issue #53: the edges keep the gateway's history (the README gives them history.key and JetStream).
  const edgeLogs = readdirSync(dir).filter((f) => /^pier-.*edge.*\.log$/.test(f));
  t.true(edgeLogs.length > 0, 'the edges log beside the reader');
  for (const f of edgeLogs) {
    const text = readFileSync(join(dir, f), 'utf8');
    t.regex(text, /"msg":"edge listening"/, f);
    t.deepEqual(text.split('\n').filter((l) => l.includes('gateway history: off')), [], `${f}: the edge keeps the history`);
  }
  await step('the example to say it runs on the cluster', () => reader.out().includes('Pier chat is running on the Pier at'), 60_000);
  const token = /alice's token: (\S+)/.exec(reader.out())?.[1];
  t.truthy(token);
  // A browser's connection through the cluster's edge: the app greets it with the motto it keeps in the
  // vault, and a "/quote" goes browser → edge → callback replica → app → provider → local API → edge.
  const client = await connect(Number(ports.PIER_PUBLIC_PORT), 'chat.alice.localhost', { 'x-authorization': token! });
  t.teardown(() => client.ws.terminate());
  const frames = () => client.received.map((m) => JSON.parse(m) as { event: string; data: { from?: string; text?: string; motto?: string } });
  await until('the welcome, with the motto from the vault', () => frames().find((f) => f.event === 'welcome' && typeof f.data.motto === 'string'), 30_000);
  client.ws.send(JSON.stringify({ event: 'chat', data: { text: '/quote' } }));
  const quote = await until('a quote from the provider app, through the cluster', () => frames().find((f) => f.event === 'chat' && f.data.from === 'quotes'), 30_000);
  t.true(typeof quote.data.text === 'string' && quote.data.text.length > 0);
});

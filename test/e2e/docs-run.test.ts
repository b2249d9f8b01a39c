import test from 'ava';
import { spawn } from 'node:child_process';
import { readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, ROOT, tempDir } from '../helpers/pier.js';
import { within } from '../helpers/wait.js';

// Docs that run (issue: operator and app-developer experience): every shell block marked
// `sh runnable` in README.md and docs/*.md runs as written against a fresh Pier (the `npm start`
// shape), `npx pier` being this checkout's CLI. A block that fails, or an answer that is a 401 (a
// curl without the headers it needs), fails the test. A bare `pier` is not defined, as in a reader's
// shell (issue #53): `pier: command not found` fails the block.

interface Block {
  file: string;
  line: number;
  code: string;
}

function runnableBlocks(file: string): Block[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```sh runnable') continue;
    const end = lines.indexOf('```', i + 1);
    out.push({ file, line: i + 1, code: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return out;
}

/** What each document's blocks may take as given (a reader has done what the text before them says). */
const PRELUDES: Record<string, string> = {
  'README.md': '',
  'docs/gateway.md': [
    'node "$ROOT/bin/pier.js" user add alice > /dev/null',
    'eval "$(node "$ROOT/bin/pier.js" app install --user alice --manifest examples/PlatformManifest.yaml --json | node -e \'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const e=JSON.parse(s).env;for(const k of Object.keys(e))console.log(`export ${k}=${JSON.stringify(e[k])}`)})\')"',
  ].join('\n'),
  'docs/vault.md': 'node "$ROOT/bin/pier.js" user add alice > /dev/null',
};

function run(script: string, cwd: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, out }));
  });
}

for (const file of Object.keys(PRELUDES)) {
  test(`the runnable blocks of ${file} run as written`, async (t) => {
    const blocks = runnableBlocks(file);
    t.true(blocks.length > 0, `${file} has runnable blocks`);
    const dir = tempDir();
    const pier = await PierProcess.start(pierEnv(join(dir, 'data')));
    t.teardown(async () => {
      await pier.stop();
      cleanup(dir);
    });
    symlinkSync(join(ROOT, 'examples'), join(dir, 'examples'));
    // The ports the docs assume (40010, 40030, 40090...) are this Pier's, whatever it bound.
    const ports = pier.ports!;
    const env = {
      ...pier.env,
      ROOT,
      PIER_ADMIN_URL: pier.adminUrl,
      PATH: `${process.env.PATH}`,
    };
    const shims = [
      'npx() { if [ "$1" = pier ]; then shift; node "$ROOT/bin/pier.js" "$@"; else command npx "$@"; fi; }',
      `curl() { local args=(); for a in "$@"; do a="\${a//localhost:40010/127.0.0.1:${ports.local}}"; a="\${a//localhost:40030/127.0.0.1:${ports.upload}}"; args+=("$a"); done; command curl -sS "\${args[@]}"; echo; }`,
    ].join('\n');
    for (const block of blocks) {
      const r = await within(`${file}:${block.line} to finish`, run(`${shims}\n${PRELUDES[file]}\n${block.code}`, dir, env), 60_000);
      t.is(r.code, 0, `${file}:${block.line}\n${r.out}`);
      t.false(/"code":\s*401/.test(r.out), `${file}:${block.line} got a 401:\n${r.out}`);
    }
    // The walk-through's export landed where the reader ran it, private, and its effects are there.
    if (file === 'README.md') {
      t.is(statSync(join(dir, 'state.ndjson')).mode & 0o777, 0o600);
      const apps = (await cli(['app', 'list', '--json'], { ...pier.env, PIER_ADMIN_URL: pier.adminUrl })).json as Array<{ app: string }>;
      t.deepEqual(apps.map((a) => a.app), ['notes'], 'chat was uninstalled by the walk-through, notes stays');
    }
  });
}

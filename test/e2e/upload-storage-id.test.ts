import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { storageIdOf } from '../../actors/upload/storage-id.js';
import { within } from '../helpers/wait.js';

// Upload replicas sharing one root start at once. A 10-minute chaos run (seed 4) stopped at its
// start: one replica read the id file another had created but not yet written, and refused it as
// empty. Processes, not promises: within one process the race did not show in 500 tries.

const ROUNDS = 40;
const PROCESSES = 4;
const SLOT_MS = 50;

const child = `import { storageIdOf } from ${JSON.stringify(new URL('../../actors/upload/storage-id.js', import.meta.url).href)};
const [roots, at, slot] = [JSON.parse(process.argv[1]), Number(process.argv[2]), Number(process.argv[3])];
for (let i = 0; i < roots.length; i++) {
  while (Date.now() < at + i * slot) {} // every process calls in the same slot, on the same root
  const id = await storageIdOf(roots[i]).catch((e) => 'ERR ' + e.message);
  console.log(id);
}`;

test('replicas (processes) starting at once on one root all get the one id, and none is refused', async (t) => {
  const base = mkdtempSync(join(tmpdir(), 'pier-storage-id-'));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const roots = Array.from({ length: ROUNDS }, (_, i) => mkdtempSync(join(base, `r${i}-`)));
  const at = Date.now() + 1_500;
  const outputs = await within(
    'every process to have asked for every root\'s id',
    Promise.all(
      Array.from({ length: PROCESSES }, () => new Promise<string[]>((resolve, reject) => {
        const p = spawn(process.execPath, ['--input-type=module', '-e', child, JSON.stringify(roots), String(at), String(SLOT_MS)]);
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.on('error', reject);
        p.on('exit', () => resolve(out.trim().split('\n')));
      })),
    ),
    30_000,
  );
  for (let i = 0; i < ROUNDS; i++) {
    const ids = outputs.map((o) => o[i]);
    t.true(ids.every((id) => id !== undefined && !id.startsWith('ERR')), `root ${i}: ${ids.join(' | ')}`);
    t.is(new Set(ids).size, 1, `root ${i}: one id`);
    t.deepEqual(readdirSync(roots[i]), ['.pier-storage'], 'no draft is left behind');
  }
});

test('an id file that is not an id is refused with what to do, never replaced', async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'pier-storage-id-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(join(root, '.pier-storage'), 'not an id at all!\n');
  await t.throwsAsync(storageIdOf(root), { message: /not a storage id; remove the file/ });
});

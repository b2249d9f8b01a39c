#!/usr/bin/env node
// What the power-cut layer costs: the same work on a lossyfs mount and in a plain folder of the same
// disk, median of three rounds each. `npm run build` first (the mount helper is compiled TypeScript);
// as root. `node powercut/overhead.mjs [count]` (default 1000).
//
// Keep in mind when reading the ratios: the mount's fsync copies the changed bytes into its durable
// copy but does not flush the real disk, while the plain folder's fsync does.
import { closeSync, fsyncSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { LossyFs } from '../dist/test/helpers/lossy-fs.js';

const count = Number(process.argv[2] ?? 1000);
const root = mkdtempSync(join(tmpdir(), 'pier-lossy-overhead-'));

async function timed(fn) {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const WORK = {
  [`${count} small files: create, write 100 B, fsync, close`]: async (dir) => {
    const data = Buffer.alloc(100, 'x');
    for (let i = 0; i < count; i++) {
      const fd = openSync(join(dir, `f${i}`), 'w');
      writeSync(fd, data);
      fsyncSync(fd);
      closeSync(fd);
    }
  },
  [`${count} small files: the same without fsync (the round trips to the daemon alone)`]: async (dir) => {
    const data = Buffer.alloc(100, 'x');
    for (let i = 0; i < count; i++) {
      const fd = openSync(join(dir, `f${i}`), 'w');
      writeSync(fd, data);
      closeSync(fd);
    }
  },
  [`LMDB: ${count} awaited puts (committed; lmdb-js syncs after, overlappingSync)`]: async (dir) => {
    const db = open({ path: join(dir, 'db'), compression: false });
    for (let i = 0; i < count; i++) await db.put(`k${i}`, { i, pad: 'x'.repeat(100) });
    await db.flushed;
    await db.close();
  },
  [`LMDB: ${count} puts, each awaited with flushed (on disk)`]: async (dir) => {
    const db = open({ path: join(dir, 'db'), compression: false });
    for (let i = 0; i < count; i++) {
      await db.put(`k${i}`, { i, pad: 'x'.repeat(100) });
      await db.flushed;
    }
    await db.close();
  },
};

const plain = join(root, 'plain');
const [backing, mnt] = [join(root, 'backing'), join(root, 'mnt')];
for (const d of [plain, backing, mnt]) mkdirSync(d);
const fs = await LossyFs.mount(backing, mnt);
try {
  for (const [name, work] of Object.entries(WORK)) {
    const rounds = { plain: [], lossy: [] };
    for (let r = 0; r < 3; r++) {
      for (const [where, base] of [['plain', plain], ['lossy', mnt]]) {
        const dir = join(base, `${name.length}-${r}`);
        mkdirSync(dir);
        rounds[where].push(await timed(() => work(dir)));
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const [p, l] = [median(rounds.plain), median(rounds.lossy)];
    console.log(`${name}\n  plain folder ${p.toFixed(0)} ms, lossyfs mount ${l.toFixed(0)} ms: ×${(l / p).toFixed(2)}`);
  }
} finally {
  await fs.unmount();
  rmSync(root, { recursive: true, force: true });
}

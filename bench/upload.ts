import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { request } from 'undici';
import { rssKiB, startChild } from './children.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../test/helpers/pier.js';
import { multipart } from '../test/helpers/upload-client.js';
import { round } from './load.js';
import { pinLoad, pinServer } from './pinning.js';
import { atMost, ratioAtLeast } from './goals.js';

const MiB = 1024 * 1024;
const CHUNK = 8 * MiB;
const chunk = randomBytes(CHUNK);


/** Runs `fn` while sampling a process's RSS; returns seconds taken and the peak growth in MiB. */
async function measured(pid: number | null, fn: () => Promise<void>): Promise<{ seconds: number; peak_rss_growth_mib: number | null }> {
  const base = pid ? rssKiB(pid) : 0;
  let peak = base;
  const sampler = pid ? setInterval(() => (peak = Math.max(peak, rssKiB(pid))), 25) : null;
  const t0 = performance.now();
  await fn();
  const seconds = (performance.now() - t0) / 1000;
  if (sampler) clearInterval(sampler);
  return { seconds, peak_rss_growth_mib: pid ? round((peak - base) / 1024, 1) : null };
}

type Uploader = (size: number, name: string) => Promise<void>;

/**
 * A PATCH body (`upload_offset`, then the chunk) as three buffers sent one after the other: the
 * chunk is not copied into a joined body, as the tus client sends its chunk as it is.
 */
function patchBody(offset: number, data: Buffer): { body: Readable; headers: Record<string, string> } {
  const boundary = `----pierbench${offset}`;
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="upload_offset"\r\n\r\n${offset}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="blob"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return { body: Readable.from([head, data, tail], { objectMode: false }), headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + data.length + tail.length) } };
}

/**
 * Every side starts on a settled disk: what the side before it wrote and removed (2 GiB, and
 * @tus/server syncs nothing) is written back and its frees journaled first, not during the
 * measurement of whichever side comes next.
 */
function settleDisk(): void {
  execFileSync('sync');
}

async function runBoth(pid: number | null, uploader: Uploader): Promise<Record<string, unknown>> {
  settleDisk();
  await uploader(32 * MiB, 'warm-up'); // JIT, connections, the first file: not measured
  settleDisk();
  const one = await measured(pid, () => uploader(1024 * MiB, 'one-gib'));
  settleDisk();
  const eight = await measured(pid, () => Promise.all(Array.from({ length: 8 }, (_, i) => uploader(128 * MiB, `eight-${i}`))).then(() => undefined));
  return {
    one_1GiB: { mb_per_s: round(1024 / one.seconds, 1), peak_rss_growth_mib: one.peak_rss_growth_mib },
    eight_x_128MiB: { mb_per_s: round(1024 / eight.seconds, 1), peak_rss_growth_mib: eight.peak_rss_growth_mib },
  };
}


/** A `pier start` of its own, pinned to the server core, with alice's `files` app uploading to `dest-<name>`. */
async function withPier<T>(dir: string, name: string, run: (p: { origin: string; headers: Record<string, string>; dest: string; pid: number }) => Promise<T>): Promise<T> {
  const dest = join(dir, `dest-${name}`);
  mkdirSync(dest);
  const pier = await PierProcess.start(pierEnv(join(dir, `data-${name}`)));
  pinServer(pier.proc.pid);
  try {
    const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
    const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
    writeFileSync(join(dir, `files-${name}.yaml`), `metadata: { name: files }\nupload: { fileType: ["*"], dest: ${dest} }\n`);
    await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, `files-${name}.yaml`)], env);
    return await run({ origin: `http://127.0.0.1:${pier.ports!.upload}`, headers: { host: 'files.alice.localhost', 'x-authorization': token }, dest, pid: pier.proc.pid! });
  } finally {
    await pier.stop();
    // The next run starts from the same disk: what this one wrote goes, and is synced out.
    rmSync(join(dir, `data-${name}`), { recursive: true, force: true });
    rmSync(dest, { recursive: true, force: true });
    execFileSync('sync');
  }
}

/**
 * Pier next to @tus/server (same machine, same disk, same 8 MiB chunks) and a plain sequential
 * write of the same bytes: MB/s for one 1 GiB upload and for 8 concurrent 128 MiB uploads, and the
 * server's peak RSS growth.
 */
export async function benchUpload(): Promise<Record<string, unknown>> {
  const dir = tempDir('pier-bench-');
  const results: Record<string, unknown> = { chunk_mib: 8, note: 'one shared 2-core VM and disk; client in this process (load core), servers and the plain writer on the server core; a 32 MiB warm-up upload each, not measured' };
  try {
    // Plain: write the bytes sequentially, fsync at the end of each file.
    const plainDir = join(dir, 'plain');
    mkdirSync(plainDir);
    // The plain writer is the disk's own peer: it runs on the servers' core, this process moved there for it.
    pinServer(process.pid);
    results.plain_disk_write = await runBoth(null, async (size, name) => {
      const fd = await open(join(plainDir, name), 'w');
      for (let off = 0; off < size; off += CHUNK) await fd.write(chunk, 0, CHUNK, off);
      await fd.sync();
      await fd.close();
    });
    // The durable floor (issue #26): the same, with fdatasync after every 8 MiB chunk, as Pier
    // makes every acknowledged chunk durable before it answers.
    results.durable_floor_write = await runBoth(null, async (size, name) => {
      const fd = await open(join(plainDir, `durable-${name}`), 'w');
      for (let off = 0; off < size; off += CHUNK) {
        await fd.write(chunk, 0, CHUNK, off);
        await fd.datasync();
      }
      await fd.close();
    });
    pinLoad(process.pid);
    rmSync(plainDir, { recursive: true });

    // @tus/server with its file store.
    const tusDir = join(dir, 'tus');
    mkdirSync(tusDir);
    const tus = await startChild('./tus-server.js', [tusDir]);
    try {
      results.tus_server = await runBoth(tus.proc.pid!, async (size) => {
        const created = await request(`http://127.0.0.1:${tus.port}/files`, { method: 'POST', headers: { 'tus-resumable': '1.0.0', 'upload-length': String(size) } });
        await created.body.dump();
        const location = new URL(String(created.headers.location), `http://127.0.0.1:${tus.port}`).pathname;
        for (let off = 0; off < size; off += CHUNK) {
          const r = await request(`http://127.0.0.1:${tus.port}${location}`, { method: 'PATCH', headers: { 'tus-resumable': '1.0.0', 'upload-offset': String(off), 'content-type': 'application/offset+octet-stream' }, body: chunk });
          await r.body.dump();
          if (r.statusCode !== 204) throw new Error(`tus answered ${r.statusCode}`);
        }
      });
    } finally {
      tus.proc.kill('SIGKILL');
      rmSync(tusDir, { recursive: true });
    }

    // Pier, the `npm start` shape: a fresh process (and data dir and folder) for each protocol. Both
    // in one process, the second run was slower whichever protocol it was (2 GiB written before it:
    // 137 vs 217 MB/s for the same protocol), so the order, not the protocol, decided the ratio.
    results.pier = await withPier(dir, 'upload', ({ origin, headers, dest, pid }) =>
      runBoth(pid, async (size, name) => {
        const form = multipart([['storage_path', dest], ['file_relative_path', name], ['file_type', 'bin'], ['file_size', String(size)]]);
        const created = await request(`${origin}/upload/`, { method: 'POST', headers: { ...headers, 'content-type': form.contentType }, body: form.body });
        const { data } = (await created.body.json()) as { data: { id: string } };
        for (let off = 0; off < size; off += CHUNK) {
          const patch = patchBody(off, chunk);
          const r = await request(`${origin}/upload/${data.id}`, { method: 'PATCH', headers: { ...headers, ...patch.headers }, body: patch.body });
          const answer = (await r.body.json()) as { code: number; message: string };
          if (answer.code !== 0) throw new Error(`pier answered ${JSON.stringify(answer)}`);
        }
      }),
    );
    // The same through the tus endpoint (docs/upload.md "tus 1.0 (`/tus/`)"), same 8 MiB chunks.
    results.pier_tus = await withPier(dir, 'tus', ({ origin, headers, pid }) =>
      runBoth(pid, async (size, name) => {
        const tusHeaders = { ...headers, 'tus-resumable': '1.0.0' };
        const created = await request(`${origin}/tus/`, { method: 'POST', headers: { ...tusHeaders, 'upload-length': String(size), 'upload-metadata': `filename ${Buffer.from(name).toString('base64')}` } });
        await created.body.dump();
        if (created.statusCode !== 201) throw new Error(`pier tus answered ${created.statusCode}`);
        const location = String(created.headers.location);
        for (let off = 0; off < size; off += CHUNK) {
          const r = await request(`${origin}${location}`, { method: 'PATCH', headers: { ...tusHeaders, 'upload-offset': String(off), 'content-type': 'application/offset+octet-stream' }, body: chunk });
          await r.body.dump();
          if (r.statusCode !== 204) throw new Error(`pier tus answered ${r.statusCode}`);
        }
      }),
    );
    const ratio = (a: any, b: any, k: string) => round(a[k].mb_per_s / b[k].mb_per_s, 2);
    const p = results.pier as any;
    results.ratios = {
      pier_to_tus: { one_1GiB: ratio(p, results.tus_server, 'one_1GiB'), eight_x_128MiB: ratio(p, results.tus_server, 'eight_x_128MiB'), goal: 1.2 },
      pier_to_plain_write: { one_1GiB: ratio(p, results.plain_disk_write, 'one_1GiB'), eight_x_128MiB: ratio(p, results.plain_disk_write, 'eight_x_128MiB'), goal: 0.8 },
      pier_peak_rss_growth_goal_mib: 64,
      pier_to_durable_floor: { one_1GiB: ratio(p, results.durable_floor_write, 'one_1GiB'), eight_x_128MiB: ratio(p, results.durable_floor_write, 'eight_x_128MiB'), goal: 0.8 },
      pier_tus_to_durable_floor: { one_1GiB: ratio(results.pier_tus, results.durable_floor_write, 'one_1GiB'), eight_x_128MiB: ratio(results.pier_tus, results.durable_floor_write, 'eight_x_128MiB'), goal: 0.8 },
      pier_tus_to_tus_server: { one_1GiB: ratio(results.pier_tus, results.tus_server, 'one_1GiB'), eight_x_128MiB: ratio(results.pier_tus, results.tus_server, 'eight_x_128MiB') },
    };
    const t = results.pier_tus as any;
    const floor = results.durable_floor_write as any;
    results.goals = [
      ratioAtLeast('upload 1 GiB vs the durable floor (MB/s)', p.one_1GiB.mb_per_s, floor.one_1GiB.mb_per_s, 0.8),
      ratioAtLeast('upload 8 x 128 MiB vs the durable floor (MB/s)', p.eight_x_128MiB.mb_per_s, floor.eight_x_128MiB.mb_per_s, 0.8),
      atMost('upload peak RSS growth (MiB, the worse of the two)', Math.max(p.one_1GiB.peak_rss_growth_mib, p.eight_x_128MiB.peak_rss_growth_mib), 64),
      ratioAtLeast('upload over tus 1 GiB vs the durable floor (MB/s)', t.one_1GiB.mb_per_s, floor.one_1GiB.mb_per_s, 0.8),
      ratioAtLeast('upload over tus 8 x 128 MiB vs the durable floor (MB/s)', t.eight_x_128MiB.mb_per_s, floor.eight_x_128MiB.mb_per_s, 0.8),
    ];
    return results;
  } finally {
    cleanup(dir);
  }
}

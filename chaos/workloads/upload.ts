import { UploadTexts } from '../../bus/upload-texts.js';
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { checkUploads } from '../checks/upload.js';
import type { Rng } from '../random.js';
import { ChaosUploadClient, type Outcome } from '../upload-client.js';
import type { Checker, Workload, WorkloadContext } from '../workload.js';

/**
 * Resumable uploads under faults: a few uploaders, each sending files of random sizes in chunks to
 * its own paths, resuming after every failure as the SDK does (re-POST to learn the upload and its
 * offset, then PATCH from there), with bounded retries and backoff, every request with a deadline.
 * Every POST, PATCH and GET is in the history with the offset the server answered; a completion with
 * the file's sha256, size and path in the user's view (the checker reads only that and the disk).
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const USER = 'chaos-upload';
const APP = 'chaosup';
const DEST = '/chaos';
const UPLOADERS = 3;
const POST_TIMEOUT_MS = 15_000;
const PATCH_TIMEOUT_MS = 30_000;
/** Failures in a row (no answer, 5xx, busy, app not known yet) before a file is left for later. */
const MAX_FAILURES = 10;
const MAX_OFFSET_MOVES = 20;
const SETTLE_MS = 150_000;
const MAX_FILES_PER_UPLOADER = 1_000;

interface Job {
  file: string;
  rel: string;
  path: string;
  size: number;
  chunk: number;
  sha256: string;
  scratch: string;
  uploadId?: string;
  offset: number;
  state: 'active' | 'done' | 'refused';
}

interface Shared {
  client: ChaosUploadClient;
  token: string;
  /** Files not completed (nor definitively refused) when run ended: settle finishes them. */
  open: Job[];
}

const shared = new WeakMap<WorkloadContext, Shared>();
/** A function, so TypeScript does not keep `state` narrowed across the awaits that change it. */
const isDone = (job: Job) => job.state === 'done';
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function admin(ctx: WorkloadContext, method: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${ctx.cluster.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ctx.cluster.secrets.PIER_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  const json = (await res.json().catch(() => null)) as { data?: unknown } | null;
  if (!res.ok) throw new Error(`upload setup: ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json?.data;
}

/** A new file: contents from the uploader's seeded stream, kept on scratch disk (not in memory) until done. */
function newJob(ctx: WorkloadContext, rng: Rng, uploader: number, k: number): Job {
  const size = rng.int(64 * KiB, rng.chance(0.5) ? 2 * MiB : 24 * MiB);
  const chunk = rng.pick([256 * KiB, 1 * MiB, 3 * MiB, 8 * MiB]);
  const file = `u${uploader}-f${k}`;
  const rel = `u${uploader}/f${k}.bin`;
  const bytes = rng.bytes(size);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const scratch = join(ctx.dir, `${file}.bin`);
  writeFileSync(scratch, bytes);
  const job: Job = { file, rel, path: `${DEST}/${rel}`, size, chunk, sha256, scratch, offset: 0, state: 'active' };
  ctx.history.info('upload', 'file', { file, user: USER, path: job.path, size, sha256, chunk });
  return job;
}

async function readChunk(job: Job, from: number): Promise<Buffer> {
  const length = Math.min(job.chunk, job.size - from);
  const fd = await open(job.scratch, 'r');
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await fd.read(buf, 0, length, from);
    if (bytesRead !== length) throw new Error(`upload: scratch file ${job.scratch} is short`);
    return buf;
  } finally {
    await fd.close();
  }
}

/** Records one request's invocation and outcome; answers the outcome. */
async function recorded(ctx: WorkloadContext, op: string, fields: Record<string, unknown>, send: () => Promise<Outcome>, answer: (json: any) => Record<string, unknown>): Promise<Outcome> {
  const id = ctx.history.invoke('upload', op, fields);
  const out = await send();
  const base = { file: fields.file, uploadId: fields.uploadId };
  if (out.phase === 'ok') ctx.history.ok('upload', op, id, { ...base, status: out.status, ...answer(out.json) });
  else if (out.phase === 'fail') {
    const offset = out.json?.data?.offset;
    ctx.history.fail('upload', op, id, { ...base, status: out.status, message: out.json?.message, ...(typeof offset === 'number' ? { offset } : {}) });
  } else ctx.history.unknown('upload', op, id, { ...base, ...(out.status ? { status: out.status } : {}), error: out.error });
  return out;
}

function completed(ctx: WorkloadContext, job: Job, uploadId: string, via: string): void {
  job.state = 'done';
  ctx.history.info('upload', 'completed', { file: job.file, uploadId, user: USER, path: job.path, size: job.size, sha256: job.sha256, via });
}

/** GET of an upload: records it; a GET answering the whole size is a completion (the SDK takes it as one). */
async function inspect(ctx: WorkloadContext, s: Shared, job: Job, uploadId: string): Promise<Outcome> {
  const out = await recorded(ctx, 'get', { file: job.file, uploadId }, () => s.client.get(uploadId, POST_TIMEOUT_MS), (j) => ({ uploadId: j?.data?.id, offset: j?.data?.offset }));
  if (out.phase === 'ok' && out.json?.data?.offset === job.size) completed(ctx, job, uploadId, 'get');
  return out;
}

/**
 * Drives one file until it is complete, refused, `until` passes, or too many failures come in a row.
 * As the SDK: POST (again) to learn the upload and its offset, PATCH from the offset the server
 * gives, follow an `Invalid offset` answer's record, and after a failure ask again before sending.
 */
async function drive(ctx: WorkloadContext, s: Shared, rng: Rng, job: Job, until: number): Promise<void> {
  let needPost = true;
  let failures = 0;
  let offsetMoves = 0;
  const maxSteps = Math.ceil(job.size / job.chunk) * 4 + 60;
  const failed = async () => {
    failures++;
    await sleep(Math.min(4_000, 150 * 2 ** Math.min(failures, 6)) + rng.int(0, 250));
  };
  for (let step = 0; step < maxSteps && Date.now() < until && failures <= MAX_FAILURES && job.state === 'active'; step++) {
    if (needPost) {
      const fields = { storage_path: DEST, file_relative_path: job.rel, file_type: 'bin', file_size: job.size };
      const out = await recorded(ctx, 'post', { file: job.file, path: job.path, size: job.size, knownUploadId: job.uploadId }, () => s.client.create(fields, POST_TIMEOUT_MS), (j) => ({ uploadId: j?.data?.id, offset: j?.data?.offset, size: j?.data?.file_size }));
      if (out.phase === 'ok') {
        const rec = out.json?.data as { id: string; offset: number } | undefined;
        if (!rec || typeof rec.id !== 'string' || typeof rec.offset !== 'number') {
          job.state = 'refused';
          ctx.history.info('upload', 'gave up', { file: job.file, reason: `POST answered no record: ${JSON.stringify(out.json)}` });
          return;
        }
        // Another upload than the one we were sending: the old one completed (or was lost: the checker says).
        if (job.uploadId !== undefined && rec.id !== job.uploadId) {
          const old = job.uploadId;
          await inspect(ctx, s, job, old);
          if (isDone(job)) return; // completed by a PATCH whose answer was lost; the new upload stays unfinished
        }
        job.uploadId = rec.id;
        job.offset = rec.offset;
        needPost = false;
        failures = 0;
        if (rec.offset >= job.size) completed(ctx, job, rec.id, 'post');
        continue;
      }
      if (out.phase === 'fail' && ![404, 409, 429].includes(out.status)) {
        job.state = 'refused';
        ctx.history.info('upload', 'gave up', { file: job.file, reason: `POST refused: ${out.status} ${JSON.stringify(out.json)}` });
        return;
      }
      await failed();
      continue;
    }
    const uploadId = job.uploadId!;
    const from = job.offset;
    const chunk = await readChunk(job, from);
    const out = await recorded(ctx, 'patch', { file: job.file, uploadId, from, length: chunk.byteLength }, () => s.client.patch(uploadId, from, chunk, PATCH_TIMEOUT_MS), (j) => ({
      offset: j?.data?.offset,
      complete: j?.message === UploadTexts.UPLOADED,
    }));
    if (out.phase === 'ok') {
      failures = 0;
      job.offset = Number(out.json?.data?.offset);
      if (out.json?.message === UploadTexts.UPLOADED) completed(ctx, job, uploadId, 'patch');
      else if (!(job.offset < job.size)) needPost = true;
      continue;
    }
    if (out.phase === 'fail' && out.json?.message === UploadTexts.INVALID_OFFSET && typeof out.json?.data?.offset === 'number') {
      if (++offsetMoves > MAX_OFFSET_MOVES) break;
      job.offset = out.json.data.offset;
      continue;
    }
    if (out.phase === 'fail' && out.json?.message === UploadTexts.INVALID_UPLOAD_ID) {
      // Finished (by a PATCH whose answer was lost) or gone: ask, then POST again if not complete.
      await inspect(ctx, s, job, uploadId);
      if (isDone(job)) return;
      needPost = true;
      await failed();
      continue;
    }
    if (out.phase === 'fail' && ![404, 409, 429].includes(out.status)) {
      job.state = 'refused';
      ctx.history.info('upload', 'gave up', { file: job.file, uploadId, reason: `PATCH refused: ${out.status} ${JSON.stringify(out.json)}` });
      return;
    }
    needPost = true;
    await failed();
  }
  if (job.state === 'active') ctx.history.info('upload', 'left unfinished', { file: job.file, uploadId: job.uploadId, offset: job.offset, failures });
}

async function uploader(ctx: WorkloadContext, s: Shared, index: number): Promise<void> {
  const rng = ctx.rng.fork(`uploader-${index}`);
  for (let k = 0; k < MAX_FILES_PER_UPLOADER && Date.now() < ctx.deadline; k++) {
    const job = newJob(ctx, rng, index, k);
    await drive(ctx, s, rng, job, ctx.deadline);
    if (job.state === 'active') s.open.push(job);
    else rmSync(job.scratch, { force: true });
  }
}

export const workload: Workload = {
  name: 'upload',

  async setup(ctx) {
    const { token } = await admin(ctx, 'POST', '/admin/v1/users', { name: USER });
    const manifest = `metadata: { name: ${APP} }\nupload: { fileType: ["*"], dest: ${DEST}, limitedSize: ${64 * MiB} }\n`;
    const installed = await admin(ctx, 'POST', '/admin/v1/apps', { user: USER, manifest });
    ctx.history.info('upload', 'setup', { user: USER, app: APP, dest: DEST, uploadDir: installed?.uploadDir ?? null });
    const client = new ChaosUploadClient(ctx.cluster.url('upload'), `${APP}.${USER}.localhost`, token);
    // Both edges learn of the app through their registry caches: a folder entry for dest itself
    // changes nothing and answers success once the edge behind haproxy knows the app.
    let known = 0;
    for (let i = 0; i < 200 && known < 6; i++) {
      const out = await client.create({ storage_path: DEST }, POST_TIMEOUT_MS);
      known = out.phase === 'ok' ? known + 1 : 0;
      if (known < 6) await sleep(100);
    }
    if (known < 6) throw new Error('upload setup: the edges did not learn of the app in time');
    shared.set(ctx, { client, token, open: [] });
  },

  async run(ctx) {
    const s = shared.get(ctx)!;
    await Promise.all(Array.from({ length: UPLOADERS }, (_, i) => uploader(ctx, s, i)));
  },

  async settle(ctx) {
    const s = shared.get(ctx)!;
    const until = Date.now() + SETTLE_MS;
    const rng = ctx.rng.fork('settle');
    ctx.log(`settling ${s.open.length} unfinished upload(s)`);
    const queue = [...s.open];
    await Promise.all(
      Array.from({ length: UPLOADERS }, async () => {
        for (let job = queue.shift(); job && Date.now() < until; job = queue.shift()) await drive(ctx, s, rng, job, until);
      }),
    );
    for (const job of s.open) rmSync(job.scratch, { force: true });
    await s.client.close();
  },
};

export const check: Checker = checkUploads;

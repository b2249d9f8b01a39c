import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { TusRaw } from '../helpers/tus-raw.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

// Upload records on JetStream (docs/operations.md "How writes stay correct"), every role on its own NATS identity over
// TLS: two upload replicas on two "hosts" (own data dirs, nothing on their disks but the shared
// upload root, as shared storage) serve the same uploads; one is killed mid-file and the other
// finishes it. The registry's state is on JetStream too.
test('two upload replicas sharing an upload root, records on JetStream: kill -9 one mid-file, the other takes over and the file is identical (section 7 and tus)', async (t) => {
  const dir = tempDir();
  const bus = await SecureBus.start(dir, {}, { jetstream: true });
  const masterKey = randomBytes(32).toString('hex');
  const adminToken = randomBytes(24).toString('hex');
  const uploadRoot = join(dir, 'shared-storage');
  mkdirSync(uploadRoot);
  const start = (role: string, name = role, extra: Record<string, string> = {}) =>
    PierProcess.start(
      pierEnv(join(dir, name), {
        ...bus.envFor(role),
        PIER_HEARTBEAT_MS: '250',
        PIER_STATE: 'jetstream',
        PIER_JS_REPLICAS: '1',
        PIER_UPLOAD_ROOT: uploadRoot,
        ...(role === 'registry' ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
        ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
        ...extra,
      }),
      ['--roles', role],
    );
  const procs: PierProcess[] = [];
  t.teardown(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await bus.stop();
    cleanup(dir);
  });
  procs.push(await start('registry'), await start('upload', 'upload-host-1'), await start('upload', 'upload-host-2'), await start('edge'));
  const [, first, second, edge] = procs;
  procs.push(await start('admin', 'admin', { PIER_SYSTEM_URL: `127.0.0.1:${edge.ports!.system}` }));
  const env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: procs[4].adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'files.yaml'), `metadata: { name: files }\nupload: { fileType: ["*"], dest: /dest }\n`);
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'files.yaml'), '--json'], env);
  t.is(installed.code, 0, installed.stderr);
  const dest: string = installed.json.uploadDir;
  const client = new UploadClient(edge.ports!.upload, 'files.alice.localhost', token);

  const data = randomBytes(24 * MiB);
  const fields = { storage_path: '/dest', file_relative_path: 'big.bin', file_type: 'x', file_size: data.length };
  const rec = await until('the upload to be created (caches learn of the app)', async () => {
    const r = await client.create(fields);
    return r.status === 200 ? r.json.data : undefined;
  });
  // Half the file: PATCHes go to either replica (one queue group); each sees the other's records.
  for (let off = 0; off < 12 * MiB; off += 2 * MiB) {
    const r = await client.patch(rec.id, off, data.subarray(off, off + 2 * MiB));
    t.is(r.status, 200, JSON.stringify(r.json));
  }
  // A tus upload (docs/upload.md "tus 1.0 (`/tus/`)") on the same records: half of it before the kill.
  const tus = new TusRaw(edge.ports!.upload, 'files.alice.localhost', token);
  const tusData = randomBytes(4 * MiB);
  const tusUpload = await tus.create(tusData.length, { filename: 'tus.bin' });
  t.is(tusUpload.status, 201, tusUpload.text);
  t.is((await tus.patch(tusUpload.id, 0, tusData.subarray(0, 2 * MiB))).status, 204);
  await (Math.random() < 0.5 ? first : second).stop('SIGKILL');

  // The client resumes as the platform's does: POST again, then PATCH from the offset it is given.
  const resumed = await until('a surviving replica to answer the re-POST', async () => {
    const r = await client.create(fields);
    return r.status === 200 ? r.json.data : undefined;
  }, 15_000);
  t.is(resumed.id, rec.id, 'the same upload, known to the survivor');
  t.is(resumed.offset, 12 * MiB, 'every acknowledged byte kept');
  const last = await until('the rest to be accepted (the dead replica\'s requests time out first)', async () => {
    const r = await client.sendAll(rec.id, data, 2 * MiB, (await client.get(rec.id)).json?.data?.offset ?? 0);
    return r.status === 200 ? r : undefined;
  }, 30_000);
  t.is(last.json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(join(dest, 'big.bin'))), sha(data));

  // The tus client resumes by URL: HEAD on the survivor tells the offset the dead replica acknowledged.
  const head = await until('the survivor to answer the tus HEAD', async () => {
    const r = await tus.head(tusUpload.id);
    return r.status === 200 ? r : undefined;
  }, 15_000);
  t.is(head.headers['upload-offset'], String(2 * MiB));
  const rest = await tus.patch(tusUpload.id, 2 * MiB, tusData.subarray(2 * MiB));
  t.is(rest.status, 204, rest.text);
  t.is(sha(readFileSync(join(dest, 'tus.bin'))), sha(tusData));
});

import { hear } from '../../bus/verbs.js';
import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NatsBus } from '../../bus/bus-nats.js';
import { uploadEvents, type UploadCompleted } from '../../bus/subjects.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

test('the upload actor in its own process over NATS: 50 MiB in 8 MiB chunks and 3 MiB in one, identical; completed events on the bus', async (t) => {
  const dir = tempDir();
  const nats = await NatsServer.start();
  const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };
  const start = (name: string, roles: string) => PierProcess.start(pierEnv(join(dir, name), { ...shared, NATS_URL: nats.url }), ['--roles', roles]);
  const procs = [await start('registry', 'registry'), await start('upload', 'upload')];
  const edge = await start('edge', 'edge,admin');
  procs.push(edge);
  const bus = await NatsBus.connect({ url: nats.url, name: 'test-listener' });
  t.teardown(async () => {
    await bus.close();
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await nats.stop();
    cleanup(dir);
  });
  const completed: UploadCompleted[] = [];
  hear(bus, uploadEvents.completed, (e) => completed.push(e));

  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'files.yaml'), `metadata: { name: files }\nupload: { fileType: ["*"], dest: /dest }\n`);
  const dest: string = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'files.yaml'), '--json'], env)).json.uploadDir;
  const client = new UploadClient(edge.ports!.upload, 'files.alice.localhost', token);

  const create = (rel: string, size: number) =>
    until(`the upload of ${rel} to be created`, async () => {
      const r = await client.create({ storage_path: '/dest', file_relative_path: rel, file_type: 'anything', file_size: size });
      if (r.status === 200) return r.json.data;
      t.is(r.status, 404, 'only while the caches learn of the new app'); // app not yet known to the upload actor
      return undefined;
    });
  const big = randomBytes(50 * MiB);
  const rec = await create('in/big.bin', big.length);
  t.is((await client.sendAll(rec.id, big, 8 * MiB)).json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(join(dest, 'in', 'big.bin'))), sha(big));
  const small = randomBytes(3 * MiB);
  const one = await create('small.bin', small.length);
  t.is((await client.patch(one.id, 0, small)).json.message, 'File uploaded successfully');
  t.is(sha(readFileSync(join(dest, 'small.bin'))), sha(small));

  await until('both completed events on the bus', () => completed.length >= 2);
  t.deepEqual(completed, [
    // Paths in the app's view: the app never learns where its user's folder is on the host.
    { user: 'alice', app: 'files', path: '/dest/in/big.bin', size: big.length },
    { user: 'alice', app: 'files', path: '/dest/small.bin', size: small.length },
  ]);
});

import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { partPathFor } from '../../actors/upload/files.js';
import { LmdbUploadStore } from '../../actors/upload/store.js';
import { NatsServer } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

// The chaos run's finding (docs/upload.md "Clean-up"): an upload replica died after it recorded a
// file's full size and before the rename that publishes it. Nobody asks about the upload again; the
// surviving replica must publish it once it knows its peer is dead, not at its own next start or at
// the hourly clean-up. The state the dead replica left is written here directly into the records
// two upload replicas of one host share (one LMDB environment, one upload root).
test('an upload replica dies between recording a whole file and publishing it: the survivor publishes it once the death is known, unasked', async (t) => {
  const dir = tempDir();
  const nats = await NatsServer.start();
  const uploadRoot = join(dir, 'shared-storage');
  const shared = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex'), PIER_HEARTBEAT_MS: '250', PIER_UPLOAD_ROOT: uploadRoot, NATS_URL: nats.url };
  const start = (dataDir: string, roles: string) => PierProcess.start(pierEnv(join(dir, dataDir), shared), ['--roles', roles]);
  const procs: PierProcess[] = [];
  let store: LmdbUploadStore | null = null;
  t.teardown(async () => {
    await store?.close();
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    await nats.stop();
    cleanup(dir);
  });
  procs.push(await start('registry', 'registry'), await start('upload-host', 'upload'), await start('upload-host', 'upload'));
  const [, survivor, dying] = procs;
  const edge = await start('edge', 'edge,admin');
  procs.push(edge);

  const env = { ...pierEnv(join(dir, 'cli'), shared), PIER_ADMIN_URL: edge.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'files.yaml'), `metadata: { name: files }\nupload: { fileType: ["*"], dest: /dest }\n`);
  const dest: string = (await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'files.yaml'), '--json'], env)).json.uploadDir;
  const client = new UploadClient(edge.ports!.upload, 'files.alice.localhost', token);
  const data = randomBytes(256 * 1024);
  const rec = await until('the upload to be created (caches learn of the app)', async () => {
    const r = await client.create({ storage_path: '/dest', file_relative_path: 'cut.bin', file_type: 'x', file_size: data.length });
    return r.status === 200 ? r.json.data : undefined;
  });

  // The dying replica's bus id, as it announces itself.
  const replicas = await until('both upload replicas in the status', async () => {
    const res = await fetch(`${edge.adminUrl}/admin/v1/status`, { headers: { authorization: `Bearer ${shared.PIER_ADMIN_TOKEN}` } });
    const list = ((await res.json()) as { data: { replicas: Array<{ pid: number; busId: string; roles: string[] }> } }).data.replicas;
    return list.filter((r) => r.roles.includes('upload')).length === 2 ? list : undefined;
  });
  const dyingBusId = replicas.find((r) => r.pid === dying.proc.pid)!.busId;
  t.truthy(dyingBusId);

  // What `finish` leaves when its process dies before the rename: every byte in the part, the
  // full size recorded, the writer's lock (lease far from over) still on the record.
  writeFileSync(partPathFor(dest, rec.id), data);
  store = LmdbUploadStore.open(join(dir, 'upload-host', 'uploads'));
  const u = store.get(rec.id)!;
  t.is(u.state, 'active');
  await store.write((w) => w.put({ ...w.get(rec.id)!, offset: data.length, lock: { owner: dyingBusId, session: 'cut-session', until: Date.now() + 120_000 } }));

  await dying.stop('SIGKILL');
  const target = join(dest, 'cut.bin');
  await until('the survivor to publish the whole upload its dead peer left, with no request about it', () => existsSync(target), 20_000);
  t.is(sha(readFileSync(target)), sha(data));
  t.false(existsSync(partPathFor(dest, rec.id)), 'the part is gone: renamed, not copied');
  t.is(survivor.proc.exitCode, null, 'the survivor did it, and runs on');
  const asked = await client.get(rec.id);
  t.is(asked.json?.data?.offset, data.length);
});

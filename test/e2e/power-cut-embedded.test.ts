import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { LossyFs } from '../helpers/lossy-fs.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { connect } from '../helpers/ws-client.js';
import { WsApp } from '../helpers/ws-app.js';
import { until } from '../helpers/wait.js';
import { mkdirDurable } from '../../lib/state/durable-files.js';

// The embedded default under a power cut (docs/operations.md "What an acknowledgement means"): one
// process, its data dir (master key, admin token, LMDB stores) and upload root on a layer that
// loses every write not fsynced and every name whose folder was not (powercut/README.md). Under
// registry, vault, gateway-history and upload writes, the process is killed (-9) and the power cut;
// started again, it has every write it acknowledged.
const why = LossyFs.unavailable();
const maybe = why ? test.skip : test.serial;
if (why) {
  test('the power-cut layer runs here (needs root and /dev/fuse)', (t) => {
    t.log(`skipped: ${why}`);
    t.pass();
  });
}

const KiB = 1024;

maybe('a power cut of the one process loses no acknowledged registry change, vault write, kept send or upload offset', async (t) => {
  t.timeout(180_000, 'two starts of Pier on the layer, the workload, the cut');
  const dir = tempDir('pier-power-');
  mkdirSync(join(dir, 'backing'));
  mkdirSync(join(dir, 'mnt'));
  const fs = await LossyFs.mount(join(dir, 'backing'), join(dir, 'mnt'));
  const app = await WsApp.start();
  const data = join(dir, 'mnt', 'data');
  const root = join(dir, 'mnt', 'files');
  const start = () => PierProcess.start(pierEnv(data, { PIER_UPLOAD_ROOT: root }), [], 60_000);
  let pier = await start();
  t.teardown(async () => {
    await pier.stop('SIGKILL');
    await app.stop();
    await fs.unmount().catch(() => undefined);
    cleanup(dir);
  });
  const cliEnv = () => ({ ...pier.env, PIER_ADMIN_URL: pier.adminUrl });

  // Registry: a user and an app (vault grant, websocket, upload).
  const token = (await cli(['user', 'add', 'alice', '--json'], cliEnv())).json.token as string;
  const manifest = join(dir, 'chat.yaml');
  writeFileSync(
    manifest,
    'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, UpdateSecret?workspace=chat] }\n' +
      `options:\n  websocket: { url: /ws/message, port: ${app.port} }\nupload: { fileType: [bin], dest: /dest, limitedSize: ${1024 * KiB} }\n`,
  );
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', manifest, '--json'], cliEnv());
  if (installed.code !== 0) throw new Error(installed.stderr);
  const env = installed.json.env as AppEnv;

  // Vault: creates, then updates of half of them.
  const sys = () => `127.0.0.1:${pier.ports!.system}`;
  // The system listener's port is new at each start (port 0): the app asks where it is now.
  const auth = async () => ({ user: token, access: await accessToken({ ...env, OS_SYSTEM_SERVER: sys() }, vaultPerm('chat', ['RetrieveSecret', 'CreateSecret', 'UpdateSecret'])) });
  const a = await auth();
  const values = new Map<string, string>();
  for (let i = 0; i < 20; i++) {
    const r = await vaultCall(sys(), 'CreateSecret', 'chat', a, { name: `s${i}`, value: `v1-${i}`, env: 'prod' });
    t.is(r.status, 200, `create s${i}`);
    values.set(`s${i}`, `v1-${i}`);
  }
  for (let i = 0; i < 20; i += 2) {
    const r = await vaultCall(sys(), 'UpdateSecret', 'chat', a, { name: `s${i}`, value: `v2-${i}`, env: 'prod' });
    t.is(r.status, 200, `update s${i}`);
    values.set(`s${i}`, `v2-${i}`);
  }

  // Gateway history: sends kept for alice (no connection needed to keep them).
  const send = (payload: unknown) =>
    fetch(`http://127.0.0.1:${pier.ports!.local}/runtime/ws/conn/send`, { method: 'POST', headers: { 'x-app-key': env.OS_APP_KEY, 'x-app-secret': env.OS_APP_SECRET }, body: JSON.stringify({ users: ['alice'], payload }) }).then((r) => r.json());
  const kept: Array<{ offset: number; epoch: string }> = [];
  for (let i = 0; i < 10; i++) {
    const r = await send(`m${i}`);
    t.true(r.data?.kept, JSON.stringify(r));
    kept.push({ offset: r.data.offset, epoch: r.data.epoch });
  }

  // Upload: one file whole, one half sent (its offset acknowledged). The destination folder is the
  // operator's: made durable here, as an operator's would be on a real disk.
  mkdirDurable(join(root, 'alice', 'dest', 'docs'));
  const uploads = new UploadClient(pier.ports!.upload, 'chat.alice.localhost', token);
  const whole = randomBytes(200 * KiB);
  const w = await uploads.create({ storage_path: '/dest/docs', file_relative_path: 'whole.bin', file_type: 'bin', file_size: whole.length });
  t.is(w.status, 200, JSON.stringify(w.json));
  t.is((await uploads.sendAll(w.json.data.id, whole, 64 * KiB)).status, 200);
  const half = randomBytes(300 * KiB);
  const h = await uploads.create({ storage_path: '/dest/docs', file_relative_path: 'half.bin', file_type: 'bin', file_size: half.length });
  const sent = await uploads.patch(h.json.data.id, 0, half.subarray(0, 150 * KiB));
  t.is(sent.status, 200, JSON.stringify(sent.json));

  // The power goes out: the process dies with it, then everything not on disk is gone.
  await pier.stop('SIGKILL');
  const cut = await fs.cut();
  t.log(`power cut: ${cut.dropped} unsynced change(s) dropped, ${cut.kept} kept`);
  pier = await start();

  // Registry: the user's token and the app's credentials still hold.
  t.is((await cli(['user', 'list', '--json'], cliEnv())).code, 0);
  const after = await auth();
  for (const [name, value] of values) {
    const r = await vaultCall(sys(), 'RetrieveSecret', 'chat', after, { name, env: 'prod' });
    t.is(r.status, 200, `retrieve ${name}`);
    t.is((r.json as { data: { data: { value: string } } }).data.data.value, value, `${name} reads its last acknowledged value`);
  }

  // Gateway history: a browser recovering from the first kept send gets the other nine.
  const c = await connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token }, `/ws?recover=${kept[0]!.epoch}:${kept[0]!.offset}`);
  await until('the recovery frame and the replay', () => c.received.length >= 10);
  const frames = c.received.map((f) => JSON.parse(f) as { event: string; data: { recovered?: boolean; missed?: number; offset?: number } });
  t.like(frames[0], { event: 'pier.recovery', data: { recovered: true, missed: 9 } });
  t.deepEqual(frames.slice(1, 10).map((f) => f.data.offset), kept.slice(1).map((k) => k.offset));
  c.ws.terminate();

  // Upload: the whole file at its target; the half one resumes at least at its acknowledged offset.
  const fresh = new UploadClient(pier.ports!.upload, 'chat.alice.localhost', token);
  t.deepEqual(readFileSync(join(root, 'alice', 'dest', 'docs', 'whole.bin')), whole);
  const again = await until('the half upload answered again', async () => {
    const r = await fresh.create({ storage_path: '/dest/docs', file_relative_path: 'half.bin', file_type: 'bin', file_size: half.length });
    return r.status === 200 ? r.json.data : undefined;
  });
  t.is(again.id, h.json.data.id, 'the same upload');
  t.true(again.offset >= 150 * KiB, `resumes at ${again.offset}, at least the acknowledged ${150 * KiB}`);
  t.is((await fresh.sendAll(again.id, half, 64 * KiB, again.offset)).status, 200);
  t.deepEqual(readFileSync(join(root, 'alice', 'dest', 'docs', 'half.bin')), half);
});

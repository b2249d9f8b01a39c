import type { ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mkdirDurable } from '../../lib/state/durable-files.js';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from './app-client.js';
import { cli, type PierProcess } from './pier.js';
import { UploadClient } from './upload-client.js';
import { until } from './wait.js';
import { connect } from './ws-client.js';

// The workload of the power-cut tests (test/e2e/power-cut-*.test.ts): registry, vault,
// gateway-history and upload writes through one Pier process; then, after the cut and a new start,
// the checks that every write it acknowledged is there.

const KiB = 1024;

/** Where the workload runs: the Pier process now (a new one after the cut), its upload root, a folder for files the test writes. */
export interface PowerCutTarget {
  pier: () => PierProcess;
  /** The upload root (PIER_UPLOAD_ROOT), on the layer. */
  root: string;
  /** A folder off the layer for the manifest. */
  dir: string;
  /** The port of the app's WebSocket backend (WsApp). */
  appPort: number;
}

/** What Pier acknowledged before the cut: what it must still have after it. */
export interface Acknowledged {
  token: string;
  env: AppEnv;
  /** Each secret's last acknowledged value. */
  values: Map<string, string>;
  /** The ten kept sends, in order. */
  kept: Array<{ offset: number; epoch: string }>;
  whole: Buffer;
  half: { id: string; data: Buffer; sent: number };
}

const cliEnv = (pier: PierProcess) => ({ ...pier.env, PIER_ADMIN_URL: pier.adminUrl });
// The system listener's port is new at each start (port 0): the app asks where it is now.
const sys = (pier: PierProcess) => `127.0.0.1:${pier.ports!.system}`;
const auth = async (pier: PierProcess, token: string, env: AppEnv) => ({
  user: token,
  access: await accessToken({ ...env, OS_SYSTEM_SERVER: sys(pier) }, vaultPerm('chat', ['RetrieveSecret', 'CreateSecret', 'UpdateSecret'])),
});

/** The writes: a user and an app, 20 vault creates and 10 updates, 10 kept sends, one upload whole and one half sent. */
export async function writeWorkload(t: ExecutionContext, on: PowerCutTarget): Promise<Acknowledged> {
  const pier = on.pier();
  // Registry: a user and an app (vault grant, websocket, upload).
  const token = (await cli(['user', 'add', 'alice', '--json'], cliEnv(pier))).json.token as string;
  const manifest = join(on.dir, 'chat.yaml');
  writeFileSync(
    manifest,
    'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chat, CreateSecret?workspace=chat, UpdateSecret?workspace=chat] }\n' +
      `options:\n  websocket: { url: /ws/message, port: ${on.appPort} }\nupload: { fileType: [bin], dest: /dest, limitedSize: ${1024 * KiB} }\n`,
  );
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', manifest, '--json'], cliEnv(pier));
  if (installed.code !== 0) throw new Error(installed.stderr);
  const env = installed.json.env as AppEnv;

  // Vault: creates, then updates of half of them.
  const a = await auth(pier, token, env);
  const values = new Map<string, string>();
  for (let i = 0; i < 20; i++) {
    const r = await vaultCall(sys(pier), 'CreateSecret', 'chat', a, { name: `s${i}`, value: `v1-${i}`, env: 'prod' });
    t.is(r.status, 200, `create s${i}`);
    values.set(`s${i}`, `v1-${i}`);
  }
  for (let i = 0; i < 20; i += 2) {
    const r = await vaultCall(sys(pier), 'UpdateSecret', 'chat', a, { name: `s${i}`, value: `v2-${i}`, env: 'prod' });
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
  mkdirDurable(join(on.root, 'alice', 'dest', 'docs'));
  const uploads = new UploadClient(pier.ports!.upload, 'chat.alice.localhost', token);
  const whole = randomBytes(200 * KiB);
  const w = await uploads.create({ storage_path: '/dest/docs', file_relative_path: 'whole.bin', file_type: 'bin', file_size: whole.length });
  t.is(w.status, 200, JSON.stringify(w.json));
  t.is((await uploads.sendAll(w.json.data.id, whole, 64 * KiB)).status, 200);
  const half = randomBytes(300 * KiB);
  const h = await uploads.create({ storage_path: '/dest/docs', file_relative_path: 'half.bin', file_type: 'bin', file_size: half.length });
  const sent = await uploads.patch(h.json.data.id, 0, half.subarray(0, 150 * KiB));
  t.is(sent.status, 200, JSON.stringify(sent.json));
  return { token, env, values, kept, whole, half: { id: h.json.data.id, data: half, sent: 150 * KiB } };
}

/** After the cut and a new start: every acknowledged write is there. */
export async function checkWorkload(t: ExecutionContext, on: PowerCutTarget, acked: Acknowledged): Promise<void> {
  const pier = on.pier();
  const { token, env, values, kept, whole, half } = acked;

  // Registry: the user's token and the app's credentials still hold.
  t.is((await cli(['user', 'list', '--json'], cliEnv(pier))).code, 0);
  const after = await auth(pier, token, env);
  for (const [name, value] of values) {
    const r = await vaultCall(sys(pier), 'RetrieveSecret', 'chat', after, { name, env: 'prod' });
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
  t.deepEqual(readFileSync(join(on.root, 'alice', 'dest', 'docs', 'whole.bin')), whole);
  const again = await until('the half upload answered again', async () => {
    const r = await fresh.create({ storage_path: '/dest/docs', file_relative_path: 'half.bin', file_type: 'bin', file_size: half.data.length });
    return r.status === 200 ? r.json.data : undefined;
  });
  t.is(again.id, half.id, 'the same upload');
  t.true(again.offset >= half.sent, `resumes at ${again.offset}, at least the acknowledged ${half.sent}`);
  t.is((await fresh.sendAll(again.id, half.data, 64 * KiB, again.offset)).status, 200);
  t.deepEqual(readFileSync(join(on.root, 'alice', 'dest', 'docs', 'half.bin')), half.data);
}

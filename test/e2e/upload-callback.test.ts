import test from 'ava';
import { createServer, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CallbackReceiver, type CallbackEvent } from '@pier/sdk/server';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { until } from '../helpers/wait.js';

// The upload-completed callback (issue: operator and app-developer experience; tusd's post-finish
// hook): an app that declares `upload.callback` hears of each completed upload, signed like gateway
// callbacks (the SDK's CallbackReceiver verifies it), once.
let dir: string;
let pier: PierProcess;
let server: Server;
const heard: CallbackEvent[] = [];

test.before(async () => {
  dir = tempDir();
  pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  // The app's port is known only once it listens; its secret only once installed.
  let receiver: CallbackReceiver | null = null;
  server = createServer((req, res) => {
    if (!receiver) return void res.writeHead(503).end();
    receiver.handler()(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  writeFileSync(join(dir, 'files.yaml'), `metadata: { name: files }\nupload: { fileType: [bin], dest: /data/files, callback: /uploaded, callbackPort: ${port} }\n`);
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'files.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  receiver = new CallbackReceiver(installed.json.env.OS_APP_SECRET, (ev) => void heard.push(ev));
  const uploads = new UploadClient(pier.ports!.upload, 'files.alice.localhost', token);
  const created = await until('the upload to be created', async () => {
    const r = await uploads.create({ storage_path: '/data/files', file_relative_path: 'report.bin', file_type: 'bin', file_size: 4 });
    return r.status === 200 ? r : undefined;
  });
  const done = await uploads.patch(created.json.data.id, 0, Buffer.from('abcd'));
  if (done.status !== 200) throw new Error(JSON.stringify(done.json));
});

/** The sum of a counter on the admin listener's /metrics, for one `action` label when given. */
async function counted(name: string, action?: string): Promise<number> {
  const text = await (await fetch(`${pier.adminUrl}/metrics`)).text();
  const labels = action === undefined ? '(?:\\{[^}]*\\})?' : `\\{[^}]*action="${action}"[^}]*\\}`;
  return [...text.matchAll(new RegExp(`^${name}${labels} (\\d+)`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);
}

test.after.always(async () => {
  server?.close();
  await pier?.stop();
  cleanup(dir);
});

test('a completed upload is called back to the app: signed (the SDK verified it), with the file, once', async (t) => {
  await until('the upload callback at the app', () => heard.length > 0);
  // A second attempt comes only while the callback is unsettled: once Pier counts it delivered (the
  // app answered 2xx), nothing more is sent for it, so that count is the end of the window.
  await until('Pier to count the upload callback delivered', async () => (await counted('pier_callbacks_delivered_total', 'upload')) === 1);
  t.is(await counted('pier_callbacks_retried_total'), 0);
  t.is(heard.length, 1);
  t.like(heard[0], { action: 'upload', userName: 'alice', connId: '', data: { path: '/data/files/report.bin', size: 4 } });
  t.regex(heard[0].eventId, /^upload:[A-Za-z0-9_-]+$/);
});

test('a manifest with upload.callback but no port to use is refused at install, naming the field', async (t) => {
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  writeFileSync(join(dir, 'noport.yaml'), 'metadata: { name: noport }\nupload: { fileType: [bin], dest: /data/noport, callback: /uploaded }\n');
  const r = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'noport.yaml')], env);
  t.not(r.code, 0);
  t.regex(r.stderr, /upload\.callback: needs upload\.callbackPort/);
});

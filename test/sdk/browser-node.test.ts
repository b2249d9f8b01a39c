import test from 'ava';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { BadRequestError, connectGateway, NetworkError, upload, uploadFolder, type GatewayConnection, type UploadProgress, type WebSocketLike } from '@pier/sdk/browser';
import { CallbackReceiver, PierApp } from '@pier/sdk/server';
import { cleanup, cli, fixedPorts, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';

/** Concrete ports, kept across restarts. */
let ports: Record<string, string> | undefined;
import { until } from '../helpers/wait.js';
import { localLookup } from '../helpers/ws-client.js';
import { localFetch } from './fixtures/local-fetch.js';

/**
 * The browser half of the SDK, run in Node against a real Pier (the browser itself drives it in
 * example-chat-browser.test.ts): the gateway connection across an edge restart, its keep-alive,
 * and resumable upload — after the client died mid-chunk — with its refusals and bounded retries.
 */
let dir: string;
let pier: PierProcess;
let appServer: Server;
let userToken: string;
let uploadDir: string;
let chatEnv: Record<string, string>;
const HOST = 'chat.alice.localhost';

async function startPier(): Promise<void> {
  ports ??= await fixedPorts();
  pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_WS_IDLE_MS: '600000', ...ports }));
}

/** A browser's socket in Node: `ws`, with the user's token (a browser sends the cookie). */
const socketFactory = (url: string) => new WebSocket(url, { headers: { 'x-authorization': userToken }, lookup: localLookup as never }) as unknown as WebSocketLike;

test.before(async () => {
  dir = tempDir('pier-sdk-browser-');
  await startPier();
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  userToken = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  // The app: echoes each chat frame back to its connection.
  let receiver: CallbackReceiver | null = null;
  appServer = createServer((req, res) => (receiver ? receiver.handler()(req, res) : void res.writeHead(503).end()));
  await new Promise<void>((r) => appServer.listen(0, '127.0.0.1', r));
  writeFileSync(join(dir, 'chat.yaml'), `metadata: { name: chat }\noptions:\n  websocket: { url: /cb, port: ${(appServer.address() as { port: number }).port} }\nupload: { fileType: [bin, txt], dest: /data/chat, limitedSize: 104857600 }\n`);
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  if (installed.code !== 0) throw new Error(installed.stderr);
  chatEnv = installed.json.env;
  uploadDir = installed.json.uploadDir;
  receiver = new CallbackReceiver(chatEnv.OS_APP_SECRET, async (ev) => {
    if (ev.action !== 'message') return;
    const app = PierApp.fromEnv({ ...chatEnv, PIER_GATEWAY_URL: `http://127.0.0.1:${pier.ports!.local}` });
    await app.gateway.send({ connId: ev.connId }, { echo: ev.data });
  });
});

test.after.always(async () => {
  await pier?.stop();
  appServer?.closeAllConnections();
  appServer?.close();
  cleanup(dir);
});

function collect(conn: GatewayConnection) {
  const messages: unknown[] = [];
  const closes: Array<{ code: number; reconnecting: boolean }> = [];
  let opens = 0;
  conn.on('message', (m) => void messages.push(m));
  conn.on('close', (c) => void closes.push(c));
  conn.on('open', () => void opens++);
  return { messages, closes, opens: () => opens };
}

test.serial('the gateway connection: round trips, survives an edge restart, sends what was queued meanwhile, in order', async (t) => {
  const conn = connectGateway(`ws://${HOST}:${pier.ports!.public}/ws`, { socketFactory, reconnect: { baseMs: 100, maxMs: 1_000, maxAttempts: 200 } });
  t.teardown(() => conn.close());
  const seen = collect(conn);
  conn.send('say', 1);
  await until('the echo of the first frame', () => seen.messages.length >= 1, 10_000);
  t.deepEqual(seen.messages[0], { echo: { event: 'say', data: 1 } });
  t.is(conn.state, 'open');

  await pier.stop();
  await until('the connection to notice the edge went away', () => conn.state === 'reconnecting', 10_000);
  t.is(seen.closes[0].code, 1001);
  t.true(seen.closes[0].reconnecting);
  conn.send('say', 2);
  conn.send('say', 3);
  await startPier();
  await until('the queued frames echoed after the reconnect', () => seen.messages.length >= 3, 30_000);
  t.deepEqual(seen.messages.slice(1), [{ echo: { event: 'say', data: 2 } }, { echo: { event: 'say', data: 3 } }]);
  t.is(seen.opens(), 2);
});

test.serial('keep-alive: pongs are swallowed; a peer that stops answering is replaced after the second missed pong, not the first', async (t) => {
  // A WebSocket server that answers nothing at all, ever.
  const { WebSocketServer } = await import('ws');
  const mute = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((r) => mute.once('listening', r));
  t.teardown(() => mute.close());
  let connections = 0;
  const pings: number[] = [];
  mute.on('connection', (ws) => {
    connections++;
    ws.on('message', (m) => {
      if (String(m) === '{"event":"ping"}') pings.push(Date.now());
    });
  });
  const conn = connectGateway(`ws://127.0.0.1:${(mute.address() as { port: number }).port}/ws`, {
    socketFactory: (url) => new WebSocket(url) as unknown as WebSocketLike,
    pingIntervalMs: 100,
    pongTimeoutMs: 60,
    reconnect: { baseMs: 10, maxMs: 20 },
  });
  t.teardown(() => conn.close());
  const seen = collect(conn);
  await until('the silent peer to be given up on', () => seen.closes.length >= 1, 10_000);
  t.is(seen.closes[0].code, 4100);
  t.true(seen.closes[0].reconnecting);
  t.true(pings.length >= 2, `gave up after ${pings.length} ping(s)`);
  await until('a new connection', () => connections >= 2, 10_000);

  // Against Pier: the exact pong never reaches the app's handlers.
  // The socket's own listener counts Pier's pongs; it runs before the SDK's, frame by frame.
  let pongs = 0;
  const counting = (url: string) => {
    const ws = socketFactory(url) as unknown as WebSocket;
    ws.on('message', (m) => void (String(m) === '{"event":"pong"}' && pongs++));
    return ws as unknown as WebSocketLike;
  };
  const live = connectGateway(`ws://${HOST}:${pier.ports!.public}/ws`, { socketFactory: counting, pingIntervalMs: 50, pongTimeoutMs: 1_000 });
  t.teardown(() => live.close());
  const fromPier = collect(live);
  await until('several pings answered', () => live.state === 'open' && fromPier.opens() === 1 && pongs >= 3, 10_000);
  // A real message after them: on one socket it arrives after those pongs, so by then every pong
  // before it has been through the SDK's handlers.
  live.send('after', 'pongs');
  await until('the echo sent after the pongs', () => fromPier.messages.length >= 1, 10_000);
  t.deepEqual(fromPier.messages, [{ echo: { event: 'after', data: 'pongs' } }], 'pongs are not messages');
  t.is(fromPier.closes.length, 0);
});

test.serial('a final close (the app closed the connection) is not fought with reconnects; the queue is bounded', async (t) => {
  const conn = connectGateway(`ws://${HOST}:${pier.ports!.public}/ws`, { socketFactory, maxQueued: 2 });
  const seen = collect(conn);
  conn.send('x', 3);
  conn.send('x', 4);
  t.throws(() => conn.send('x', 5), { name: 'GatewayQueueFullError' }, 'a third frame while connecting');
  await until('open', () => conn.state === 'open', 10_000);
  const app = PierApp.fromEnv({ ...chatEnv, PIER_GATEWAY_URL: `http://127.0.0.1:${pier.ports!.local}` });
  t.is(await app.gateway.close({ users: ['alice'] }), 1);
  await until('the close', () => seen.closes.length === 1, 10_000);
  t.is(seen.closes[0].code, 4001);
  t.false(seen.closes[0].reconnecting);
  t.is(conn.state, 'closed');
  t.throws(() => conn.send('late'), { message: /closed/ });
});

test.serial('upload: progress in acknowledged bytes, byte-identical file; resumed after the client was killed mid-chunk', async (t) => {
  const endpoint = `http://${HOST}:${pier.ports!.upload}`;
  const headers = { 'x-authorization': userToken };
  const size = 5 * 1024 * 1024 + 123;
  const bytes = new Uint8Array(size).map((_, i) => (i * 31 + 7) & 0xff);
  const progress: UploadProgress[] = [];
  const record = await upload(new Blob([bytes]), { endpoint, storagePath: '/data/chat', relativePath: 'one.bin', chunkSize: 1024 * 1024, headers, fetch: localFetch, onProgress: (p) => void progress.push(p) });
  t.is(record.offset, size);
  t.deepEqual(progress.map((p) => p.loaded), [0, 1, 2, 3, 4, 5].map((m) => m * 1024 * 1024).concat(size));
  t.true(Buffer.from(readFileSync(join(uploadDir, 'one.bin'))).equals(Buffer.from(bytes)));

  // A client killed while its third chunk is half sent; a new client (a reload) resumes.
  const child = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/stalling-upload.js', import.meta.url)), endpoint, '/data/chat', 'two.bin', userToken, String(size)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await until('the child to stall mid-chunk', () => out.includes('stalled'), 20_000);
  child.kill('SIGKILL');
  const resumed: number[] = [];
  const again = await upload(new Blob([bytes]), { endpoint, storagePath: '/data/chat', relativePath: 'two.bin', chunkSize: 1024 * 1024, headers, fetch: localFetch, onProgress: (p) => void resumed.push(p.loaded) });
  t.is(again.offset, size);
  t.true(resumed[0] >= 2 * 1024 * 1024, `resumed from ${resumed[0]}, not from the start`);
  t.true(Buffer.from(readFileSync(join(uploadDir, 'two.bin'))).equals(Buffer.from(bytes)));
});

test.serial('upload refusals are thrown at once, typed; no answer is retried a bounded number of times; folders keep their paths', async (t) => {
  const endpoint = `http://${HOST}:${pier.ports!.upload}`;
  const headers = { 'x-authorization': userToken };
  let requests = 0;
  const counting: typeof fetch = (url, init) => {
    requests++;
    return localFetch(url, init);
  };
  const refused = await t.throwsAsync(upload(new Blob(['x']), { endpoint, storagePath: '/data/chat', relativePath: 'evil.exe', headers, fetch: counting }), { instanceOf: BadRequestError });
  t.regex(refused.message, /file_type/);
  t.is(requests, 1, 'a 400 is not retried');
  const outside = await t.throwsAsync(upload(new Blob(['x']), { endpoint, storagePath: '/etc', relativePath: 'a.txt', headers, fetch: localFetch }), { instanceOf: BadRequestError });
  t.regex(outside.message, /storage_path/);

  requests = 0;
  const nobody = `http://127.0.0.1:1`;
  await t.throwsAsync(upload(new Blob(['x']), { endpoint: nobody, storagePath: '/data/chat', relativePath: 'a.txt', maxRetries: 2, fetch: counting }), { instanceOf: NetworkError });
  t.is(requests, 3, 'the first try and two retries, then the error');

  // conflict=rename keeps the file already at the target; the new one lands beside it.
  await upload(new Blob(['first']), { endpoint, storagePath: '/data/chat', relativePath: 'same.txt', headers, fetch: localFetch });
  await upload(new Blob(['second']), { endpoint, storagePath: '/data/chat', relativePath: 'same.txt', conflict: 'rename', headers, fetch: localFetch });
  t.is(readFileSync(join(uploadDir, 'same.txt'), 'utf8'), 'first');
  t.is(readdirSync(uploadDir).filter((f) => f.startsWith('same')).length, 2);
  const files = ['docs/a.txt', 'docs/deep/b.txt'].map((p) => Object.assign(new File([`content of ${p}`], p.split('/').pop()!), { webkitRelativePath: p }));
  const records = await uploadFolder(files, { endpoint, storagePath: '/data/chat', headers, fetch: localFetch });
  t.deepEqual(records.map((r) => r.file_relative_path), ['docs/a.txt', 'docs/deep/b.txt']);
  t.is(readFileSync(join(uploadDir, 'docs', 'deep', 'b.txt'), 'utf8'), 'content of docs/deep/b.txt');
});

import test from 'ava';
import { closeSync, copyFileSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { multipart } from '../helpers/upload-client.js';
import { makeCa, makeLeaf, type Pem } from '../helpers/certs.js';
import { BIN, cleanup, failedStart, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';
import { WsApp } from '../helpers/ws-app.js';
import { connectSecure, localLookup, type Client } from '../helpers/ws-client.js';

// docs/operations.md "TLS on the browser-facing listeners": `wss://` as the spec writes it, with certificates the test makes (a CA,
// a wildcard leaf for alice's apps, a second leaf chosen by SNI for bob's), reloads that keep open
// connections, and one-line refusals of bad files at start.
let dir: string;
let tlsDir: string;
let sniDir: string;
let ca: Pem;
let caPem: Buffer;
let pier: PierProcess;
let backend: WsApp;
const tokens: Record<string, string> = {};

/** A leaf for `names`, written over `base`.pem/.key (and its subject CN is `names[0]`). */
function leaf(base: string, names: string[], options: { expired?: boolean } = {}): void {
  const made = makeLeaf(tlsDir, ca, `made-${Math.random().toString(36).slice(2)}`, names, options);
  copyFileSync(made.cert, `${base}.pem`);
  copyFileSync(made.key, `${base}.key`);
}

test.before(async () => {
  dir = tempDir();
  tlsDir = join(dir, 'tls');
  sniDir = join(tlsDir, 'sni');
  mkdirSync(sniDir, { recursive: true });
  ca = makeCa(tlsDir);
  caPem = readFileSync(ca.cert);
  leaf(join(tlsDir, 'main'), ['*.alice.localhost', 'localhost', 'IP:127.0.0.1']);
  // The SNI folder names its pairs after the host pattern they serve.
  const bob = makeLeaf(tlsDir, ca, 'bob', ['*.bob.localhost']);
  copyFileSync(bob.cert, join(sniDir, '*.bob.localhost.crt'));
  copyFileSync(bob.key, join(sniDir, '*.bob.localhost.key'));
  backend = await WsApp.start();
  pier = await PierProcess.start(
    pierEnv(join(dir, 'data'), { PIER_TLS_CERT: join(tlsDir, 'main.pem'), PIER_TLS_KEY: join(tlsDir, 'main.key'), PIER_TLS_SNI_DIR: sniDir }),
  );
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  writeFileSync(join(dir, 'chat.yaml'), `metadata: { name: chat }\noptions:\n  websocket: { url: /ws/message, port: ${backend.port} }\nupload: { fileType: ["*"], dest: /data }\n`);
  for (const user of ['alice', 'bob']) {
    tokens[user] = (await cli(['user', 'add', user, '--json'], env)).json.token;
    const installed = await cli(['app', 'install', '--user', user, '--manifest', join(dir, 'chat.yaml')], env);
    if (installed.code !== 0) throw new Error(installed.stderr);
  }
});

test.after.always(async () => {
  await pier?.stop();
  await backend?.stop();
  cleanup(dir);
});

/** The subject CN of the leaf the public listener presents for `servername` (none: no SNI). */
function presented(servername: string | undefined): Promise<string> {
  return within(
    `a TLS handshake for ${servername ?? 'no SNI'}`,
    new Promise((resolve, reject) => {
      const s = tlsConnect({ port: pier.ports!.public!, host: '127.0.0.1', servername, ca: caPem }, () => {
        resolve(String(s.getPeerCertificate().subject.CN));
        s.end();
      });
      s.on('error', reject);
    }),
  );
}

const ping = async (c: Client) => {
  const before = c.received.length;
  c.ws.send('{"event":"ping"}');
  await until('the pong', () => c.received.length > before);
  return c.received.at(-1);
};

test.serial('wss:// with the CA trusted: the upgrade, ping/pong, and a message at the app', async (t) => {
  const c = await connectSecure(pier.ports!.public!, 'chat.alice.localhost', caPem, { 'x-authorization': tokens.alice, origin: 'https://chat.alice.localhost' });
  t.is(await ping(c), '{"event":"pong"}');
  c.ws.send('{"event":"hello","data":{"over":"tls"}}');
  await until('the message at the app', () => backend.accepted.some((k) => k.body.action === 'message' && JSON.stringify(k.body.data).includes('"over":"tls"')));
  c.ws.close();
  // The browser's cookie path works the same over TLS.
  const byCookie = await connectSecure(pier.ports!.public!, 'chat.alice.localhost', caPem, { cookie: `auth_token=${tokens.alice}`, origin: 'https://chat.alice.localhost' });
  t.is(await ping(byCookie), '{"event":"pong"}');
  byCookie.ws.close();
});

test.serial('SNI picks the leaf: the wildcard for alice, the folder pair for bob, the main one without SNI', async (t) => {
  t.is(await presented('chat.alice.localhost'), '*.alice.localhost');
  t.is(await presented('chat.bob.localhost'), '*.bob.localhost');
  t.is(await presented(undefined), '*.alice.localhost');
});

test.serial('the public listener speaks TLS only: a plain ws:// upgrade gets no WebSocket', async (t) => {
  const plain = await within('an answer to a plain upgrade on the TLS port', new Promise<string>((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port: pier.ports!.public, path: '/ws', headers: { host: 'chat.alice.localhost', connection: 'upgrade', upgrade: 'websocket' } });
    req.on('response', (res) => resolve(`status ${res.statusCode}`));
    req.on('upgrade', () => resolve('upgraded'));
    req.on('error', (err) => resolve(`error ${err.message}`));
    req.end();
  }));
  t.not(plain, 'upgraded');
  t.regex(plain, /^error /);
});

test.serial('upload over https: POST and PATCH, the file lands', async (t) => {
  const send = (method: string, path: string, fields: Array<[string, string | Buffer]>) =>
    within(
      `${method} ${path} over https`,
      new Promise<{ status: number; json: any }>((resolve, reject) => {
        const mp = multipart(fields);
        const req = httpsRequest(
          {
            host: 'chat.alice.localhost',
            lookup: localLookup as never,
            port: pier.ports!.upload,
            method,
            path,
            ca: caPem,
            headers: { 'x-authorization': tokens.alice, 'content-type': mp.contentType, 'content-length': mp.body.length },
          },
          (res) => {
            let body = '';
            res.on('data', (d) => (body += d));
            res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(body) }));
          },
        );
        req.on('error', reject);
        req.end(mp.body);
      }),
    );
  const created = await until('the upload to be created', async () => {
    const r = await send('POST', '/upload/', [['storage_path', '/data'], ['file_relative_path', 'tls.txt'], ['file_type', 'txt'], ['file_size', '5']]);
    return r.status === 200 ? r : undefined;
  });
  const done = await send('PATCH', `/upload/${created.json.data.id}`, [['upload_offset', '0'], ['file', Buffer.from('hello')]]);
  t.is(done.json.message, 'File uploaded successfully');
  t.is(readFileSync(join(dir, 'data', 'files', 'alice', 'data', 'tls.txt'), 'utf8'), 'hello');
});

test.serial('reload on SIGHUP and on a changed file: new handshakes get the new leaf, an open WebSocket stays open', async (t) => {
  const before = await connectSecure(pier.ports!.public!, 'chat.alice.localhost', caPem, { 'x-authorization': tokens.alice });
  t.is(await ping(before), '{"event":"pong"}');
  // A renewal of the main certificate, then SIGHUP.
  leaf(join(tlsDir, 'main'), ['*.alice.localhost', 'localhost', 'renewed.localhost']);
  pier.proc.kill('SIGHUP');
  await until('the renewed leaf for alice', async () => {
    const s = tlsConnect({ port: pier.ports!.public!, host: '127.0.0.1', servername: 'chat.alice.localhost', ca: caPem });
    const san = await new Promise<string>((resolve) => s.once('secureConnect', () => resolve(String(s.getPeerCertificate().subjectaltname))).once('error', () => resolve('')));
    s.destroy();
    return san.includes('renewed.localhost');
  });
  // Bob's pair in the folder is replaced: the file watch reloads without a signal.
  const bob2 = makeLeaf(tlsDir, ca, 'bob-2', ['*.bob.localhost', 'bob-renewed.localhost']);
  copyFileSync(bob2.key, join(sniDir, '*.bob.localhost.key'));
  copyFileSync(bob2.cert, join(sniDir, '*.bob.localhost.crt'));
  await until('the renewed leaf for bob, from the file watch', async () => {
    const s = tlsConnect({ port: pier.ports!.public!, host: '127.0.0.1', servername: 'chat.bob.localhost', ca: caPem });
    const san = await new Promise<string>((resolve) => s.once('secureConnect', () => resolve(String(s.getPeerCertificate().subjectaltname))).once('error', () => resolve('')));
    s.destroy();
    return san.includes('bob-renewed.localhost');
  });
  t.is(before.ws.readyState, before.ws.OPEN, 'the WebSocket opened before the reloads is still open');
  t.is(await ping(before), '{"event":"pong"}');
  const after = await connectSecure(pier.ports!.public!, 'chat.alice.localhost', caPem, { 'x-authorization': tokens.alice });
  t.is(await ping(after), '{"event":"pong"}');
  before.ws.close();
  after.ws.close();
});

test.serial('a bad file at reload keeps the certificates in use; the refusal is counted', async (t) => {
  writeFileSync(join(tlsDir, 'main.pem'), 'not a certificate');
  pier.proc.kill('SIGHUP');
  await until('the refused reload to be counted', async () => /pier_tls_reloads_total\{[^}]*outcome="refused"[^}]*\} [1-9]/.test(await (await fetch(`${pier.adminUrl}/metrics`)).text()));
  const c = await connectSecure(pier.ports!.public!, 'chat.alice.localhost', caPem, { 'x-authorization': tokens.alice });
  t.is(await ping(c), '{"event":"pong"}');
  c.ws.close();
  t.true(pier.proc.exitCode === null, 'the process is up');
});


test('bad files stop the start with one line: expired, mismatched key, missing, half-set', async (t) => {
  const d = join(dir, 'bad');
  mkdirSync(d, { recursive: true });
  const expired = makeLeaf(d, ca, 'expired', ['localhost'], { expired: true });
  const other = makeLeaf(d, ca, 'other', ['localhost']);
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PIER_TLS_CERT: expired.cert, PIER_TLS_KEY: expired.key }, /^pier: PIER_TLS_CERT: .*expired\.pem expired on \d{4}-\d\d-\d\dT.*\n$/],
    [{ PIER_TLS_CERT: expired.cert, PIER_TLS_KEY: other.key }, /^pier: PIER_TLS_CERT: .*other\.key is not the key of .*expired\.pem\n$/],
    [{ PIER_TLS_CERT: join(d, 'missing.pem'), PIER_TLS_KEY: other.key }, /^pier: PIER_TLS_CERT: cannot read .*missing\.pem \(ENOENT\)\n$/],
    [{ PIER_TLS_CERT: other.cert }, /^pier: PIER_TLS_CERT and PIER_TLS_KEY go together\n$/],
    [{ PIER_TLS_CERT: other.cert, PIER_TLS_KEY: other.key, PIER_TLS_LISTENERS: 'public,admin' }, /^pier: PIER_TLS_LISTENERS: "admin" is not a listener with TLS/],
  ];
  for (const [env, expected] of cases) {
    const r = await failedStart(pierEnv(join(d, 'data'), env));
    t.is(r.code, 1, JSON.stringify(env));
    t.regex(r.stderr, expected);
  }
});


/**
 * `pier start` with TLS and an SNI folder, good files of its own named `name` (the tests before left
 * bad ones behind on purpose), its stdout `stdout`.
 */
function startWithSni(name: string, stdout: number | 'pipe') {
  leaf(join(tlsDir, name), ['localhost', 'IP:127.0.0.1']);
  const sni = join(dir, `sni-${name}`);
  mkdirSync(sni);
  for (const ext of ['crt', 'key']) copyFileSync(join(sniDir, `*.bob.localhost.${ext}`), join(sni, `*.bob.localhost.${ext}`));
  return spawn(process.execPath, [BIN, 'start'], {
    env: pierEnv(join(dir, `data-${name}`), { PIER_TLS_CERT: join(tlsDir, `${name}.pem`), PIER_TLS_KEY: join(tlsDir, `${name}.key`), PIER_TLS_SNI_DIR: sni }),
    stdio: ['ignore', stdout, 'ignore'],
  });
}

/** The lines of `text` that are not a JSON object (the native library's prints, if any got through). */
function linesNotJson(text: string): string[] {
  return text.split('\n').filter((l) => {
    if (l === '') return false;
    try {
      return typeof JSON.parse(l) !== 'object';
    } catch {
      return true;
    }
  });
}

test.serial('stdout carries only JSON lines, with SNI certificates loaded and reloaded (the native library\'s debug prints are kept out)', async (t) => {
  // Stdout a file, as with `pier start > pier.log` or a container's log pipe (the next test: a socket).
  const out = join(dir, 'stdout.log');
  const fd = openSync(out, 'w');
  const proc = startWithSni('second', fd);
  closeSync(fd);
  t.teardown(() => void proc.kill('SIGKILL'));
  const text = () => readFileSync(out, 'utf8');
  await until('pier ready in the file', () => text().includes('"pier ready"'), 20_000);
  const reloads = () => text().split('tls: certificates reloaded').length + text().split('tls: reload refused').length;
  const before = reloads();
  proc.kill('SIGHUP');
  await until('the SIGHUP reload to be logged', () => reloads() > before);
  t.true(text().split('\n').filter((l) => l !== '').length > 3);
  t.deepEqual(linesNotJson(text()), []);
});

test.serial('stdout a socket (journald, a supervisor, Node\'s own pipes): still only JSON lines, through an SNI reload, to the last line of the stop', async (t) => {
  // 'pipe' is a Unix socket pair in Node: /proc/self/fd/1 cannot be reopened.
  const proc = startWithSni('third', 'pipe');
  t.teardown(() => void proc.kill('SIGKILL'));
  let text = '';
  proc.stdout!.on('data', (d) => (text += d));
  const ended = new Promise((r) => proc.stdout!.once('end', r));
  await until('pier ready on the socket', () => text.includes('"pier ready"'), 20_000);
  const reloads = () => text.split('tls: certificates reloaded').length + text.split('tls: reload refused').length;
  const before = reloads();
  proc.kill('SIGHUP');
  await until('the SIGHUP reload to be logged', () => reloads() > before);
  proc.kill('SIGTERM');
  await within('the stop to end the stream', ended, 20_000);
  t.deepEqual(linesNotJson(text), []);
  t.regex(text, /"msg":"pier stopped"/, 'the stop\'s last line got through the relay');
});


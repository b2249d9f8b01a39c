// Installs the example on a running Pier and starts its two apps (the quotes provider and the chat
// backend). Used by `npm run example:chat` (run.mjs) and by the browser test.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PIER = join(ROOT, 'bin', 'pier.js');

/**
 * Runs the `pier` CLI with `--json`; resolves with its JSON, rejects with its error's message and its
 * HTTP status (`status`, 0 when no API answered), read from the CLI's JSON error document.
 */
export function pier(args, env) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [PIER, ...args, '--json'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (err += d));
    proc.on('exit', (code) => {
      if (code === 0) return resolve(JSON.parse(out));
      let error = { status: 0, message: err.trim() };
      try {
        error = { ...error, ...JSON.parse(err).error };
      } catch {
        // Not the CLI's JSON document (a crash): its text as it is.
      }
      reject(Object.assign(new Error(`pier ${args.slice(0, 2).join(' ')}: ${error.message}`), { status: error.status }));
    });
  });
}

/** A port nothing listens on right now. */
export function freePort() {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Starts a node script; resolves once its stdout printed a line matching `ready`. */
function start(script, env, ready, timeoutMs = 20_000) {
  const proc = spawn(process.execPath, [join(here, script)], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${script} did not start within ${timeoutMs} ms`)), timeoutMs);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, match: m });
      }
    });
    proc.on('exit', (code) => reject(new Error(`${script} exited with ${code} before it was ready`)));
  });
}

/**
 * Installs the quotes provider and the chat app for `user` on the Pier whose admin API `adminEnv`
 * names (PIER_ADMIN_URL, PIER_ADMIN_TOKEN or PIER_DATA_DIR), with its listeners on `ports`, and
 * starts both apps. `dir` receives the manifests. Answers the page's URL and a stop function.
 */
export async function setupChat({ adminEnv, ports, dir, user = 'alice', domain = 'localhost', chatPort = 0, tls = false, edgeHost = '127.0.0.1', existingUser = 'fail' }) {
  // On a Pier that already knows the user (`existingUser: 'token'`), a new token of theirs.
  const { token } = await pier(['user', 'add', user], adminEnv).catch((err) => {
    if (existingUser === 'token' && err.status === 409) return pier(['user', 'token', user], adminEnv);
    throw err;
  });

  const quotes = await start('quotes-provider.mjs', { ...process.env, PORT: '0' }, /^(\d+)\n/);
  const quotesPort = Number(quotes.match[1]);
  writeFileSync(join(dir, 'quotes.yaml'), 'metadata: { name: quotes, version: 1.0.0 }\n');
  writeFileSync(
    join(dir, 'quotes-provider.yaml'),
    [
      'apiVersion: sys.example.com/v1alpha1',
      'kind: ProviderRegistry',
      `metadata: { name: provider-quotes-${user}, namespace: user-system-${user} }`,
      'spec:',
      '  version: v2',
      '  kind: provider',
      '  dataType: quotes',
      '  group: api.quotes',
      `  endpoint: 127.0.0.1:${quotesPort}`,
      '  opApis:',
      '    - { name: random, uri: /quotes/random }',
      '',
    ].join('\n'),
  );
  await pier(['app', 'install', '--user', user, '--manifest', join(dir, 'quotes.yaml'), '--provider', join(dir, 'quotes-provider.yaml')], adminEnv);

  const port = chatPort || (await freePort());
  writeFileSync(
    join(dir, 'chat.yaml'),
    [
      'metadata: { name: chat, version: 1.0.0 }',
      'permission:',
      '  sysData:',
      '    - { dataType: secret, group: secret.vault, version: v1, ops: ["RetrieveSecret?workspace=chat", "CreateSecret?workspace=chat"] }',
      '    - { appName: quotes, version: v2, dataType: quotes, group: api.quotes, ops: [random] }',
      'options:',
      `  websocket: { url: /cb, port: ${port} }`,
      'upload: { fileType: ["*"], dest: /data/chat, limitedSize: 1073741824 }',
      '',
    ].join('\n'),
  );
  const installed = await pier(['app', 'install', '--user', user, '--manifest', join(dir, 'chat.yaml')], adminEnv);

  const host = `chat.${user}.${domain}`;
  const chat = await start(
    'app.mjs',
    {
      ...process.env,
      ...installed.env,
      PIER_GATEWAY_URL: `http://${edgeHost}:${ports.local}`,
      CHAT_PORT: String(port),
      CHAT_LOGIN_TOKEN: token,
      // With PIER_TLS_CERT the public and upload listeners speak TLS only.
      CHAT_WS_URL: `${tls ? 'wss' : 'ws'}://${host}:${ports.public}/ws`,
      CHAT_UPLOAD_URL: `${tls ? 'https' : 'http'}://${host}:${ports.upload}`,
      CHAT_STORAGE_PATH: '/data/chat',
    },
    /chat listening on (\d+)/,
  );
  return {
    url: `http://${host}:${port}/`,
    userToken: token,
    uploadDir: installed.uploadDir,
    stop: () => {
      chat.proc.kill();
      quotes.proc.kill();
    },
  };
}

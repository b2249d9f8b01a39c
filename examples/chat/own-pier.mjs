// The example with a Pier of its own (run.mjs without --pier): a fresh data dir under
// ./data/example-chat, removed at the end unless EXAMPLE_KEEP_DATA=1. Pier's ports follow
// PIER_*_PORT when set (any free one otherwise), TLS follows PIER_TLS_CERT/KEY, and its logs go to
// pier.log in the data dir. Ctrl-C stops everything.
import { spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, setupChat } from './setup.mjs';

const base = join(ROOT, 'data', 'example-chat');
mkdirSync(base, { recursive: true });
const dataDir = mkdtempSync(join(base, 'run-'));
const port = (name) => process.env[name] || '0';
const env = {
  ...process.env,
  PIER_DATA_DIR: dataDir,
  PIER_PUBLIC_PORT: port('PIER_PUBLIC_PORT'),
  PIER_SYSTEM_PORT: port('PIER_SYSTEM_PORT'),
  PIER_LOCAL_PORT: port('PIER_LOCAL_PORT'),
  PIER_UPLOAD_PORT: port('PIER_UPLOAD_PORT'),
  PIER_ADMIN_PORT: port('PIER_ADMIN_PORT'),
  PIER_LOG_LEVEL: process.env.PIER_LOG_LEVEL || 'info',
};
const tls = Boolean(process.env.PIER_TLS_CERT);
const logFile = join(dataDir, 'pier.log');
const cleanUp = () => {
  if (process.env.EXAMPLE_KEEP_DATA !== '1') rmSync(dataDir, { recursive: true, force: true });
};

// Pier in a process group of its own: Ctrl-C in the terminal reaches this script only, which asks
// Pier to stop once (SIGTERM). In the terminal's group Pier would get the SIGINT too, and then this
// script's SIGTERM, and take the second signal for "stop now, without waiting".
const pierProc = spawn(process.execPath, [join(ROOT, 'bin', 'pier.js'), 'start'], { env, stdio: ['ignore', 'pipe', 'inherit'], detached: true });
// Whatever ends this script ends Pier too (it is not in the terminal's group any more).
process.on('exit', () => {
  if (pierProc.exitCode === null && pierProc.signalCode === null) pierProc.kill('SIGKILL');
});
const log = createWriteStream(logFile, { flags: 'a' });
pierProc.stdout.pipe(log);

let chat;
let stopping = false;
const stop = () => {
  // A second Ctrl-C is passed on as Pier's second signal: stop now, without waiting.
  if (stopping) return void pierProc.kill('SIGTERM');
  stopping = true;
  chat?.stop();
  pierProc.once('exit', () => {
    cleanUp();
    process.exit(0);
  });
  pierProc.kill('SIGTERM');
};
// From the start: a signal while Pier starts stops it too (the default action would leave it running).
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

const ports = await new Promise((resolve, reject) => {
  let out = '';
  pierProc.stdout.on('data', (d) => {
    out += d;
    const line = out.split('\n').find((l) => l.includes('"pier ready"'));
    if (line) resolve(JSON.parse(line).ports);
  });
  pierProc.on('exit', (code) => reject(new Error(`pier exited with ${code} (its log: ${logFile})`)));
}).catch((err) => {
  process.stderr.write(`example: ${err.message}\n`);
  process.exit(1);
});

try {
  chat = await setupChat({ adminEnv: { ...env, PIER_ADMIN_URL: `http://127.0.0.1:${ports.admin}` }, ports, dir: dataDir, tls });
} catch (err) {
  process.stderr.write(`example: ${err.message} (Pier's log: ${logFile})\n`);
  pierProc.once('exit', () => process.exit(1));
  pierProc.kill('SIGTERM');
}
process.stdout.write(
  [
    '',
    `Pier chat is running. Open ${chat.url}`,
    '  (*.localhost names resolve to this machine in Chrome, Chromium and Firefox)',
    '  type a message, or /quote to call the quotes provider; pick a file to upload it.',
    `  uploads land in ${chat.uploadDir}`,
    `  Pier's data: ${dataDir} (removed at the end unless EXAMPLE_KEEP_DATA=1); its log: ${logFile}`,
    'Ctrl-C stops everything.',
    '',
  ].join('\n'),
);

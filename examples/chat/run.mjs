// `npm run example:chat`: starts Pier (a fresh data dir under ./data/example-chat), installs the
// example's two apps and prints the URL to open. Ctrl-C stops everything.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, setupChat } from './setup.mjs';

const base = join(ROOT, 'data', 'example-chat');
mkdirSync(base, { recursive: true });
const dataDir = mkdtempSync(join(base, 'run-'));
const env = { ...process.env, PIER_DATA_DIR: dataDir, PIER_PUBLIC_PORT: '0', PIER_SYSTEM_PORT: '0', PIER_LOCAL_PORT: '0', PIER_UPLOAD_PORT: '0', PIER_ADMIN_PORT: '0', PIER_LOG_LEVEL: 'info' };

const pierProc = spawn(process.execPath, [join(ROOT, 'bin', 'pier.js'), 'start'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
const ports = await new Promise((resolve, reject) => {
  let out = '';
  pierProc.stdout.on('data', (d) => {
    out += d;
    const line = out.split('\n').find((l) => l.includes('"pier ready"'));
    if (line) resolve(JSON.parse(line).ports);
  });
  pierProc.on('exit', (code) => reject(new Error(`pier exited with ${code}`)));
});
pierProc.stdout.resume();

let chat;
const stop = () => {
  chat?.stop();
  pierProc.kill('SIGTERM');
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

try {
  chat = await setupChat({ adminEnv: { ...env, PIER_ADMIN_URL: `http://127.0.0.1:${ports.admin}` }, ports, dir: dataDir });
} catch (err) {
  process.stderr.write(`example: ${err.message}\n`);
  pierProc.kill('SIGTERM');
  process.exit(1);
}
process.stdout.write(
  [
    '',
    `Pier chat is running. Open ${chat.url}`,
    '  (*.localhost names resolve to this machine in Chrome, Chromium and Firefox)',
    '  type a message, or /quote to call the quotes provider; pick a file to upload it.',
    `  uploads land in ${chat.uploadDir}`,
    `  Pier's data: ${dataDir}`,
    'Ctrl-C stops everything.',
    '',
  ].join('\n'),
);

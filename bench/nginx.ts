import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './children.js';
import { pinServer } from './pinning.js';

const PATH = `${process.env.PATH}:/usr/sbin:/usr/local/sbin`;

export const nginxMissing = () => spawnSync('nginx', ['-v'], { env: { ...process.env, PATH } }).status !== 0;

/**
 * nginx (Debian's package) as the reverse proxy a user would put in front of a provider instead
 * of Pier: one worker on the servers' core, `proxy_pass` to the upstream with a keep-alive pool,
 * no logs. Its own prefix in `dir`, so it needs no root and touches nothing of the system's.
 */
export async function startNginx(dir: string, upstreamPort: number): Promise<{ port: number; proc: ChildProcess; stop(): Promise<void> }> {
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const port = await freePort();
  const temp = (name: string) => `${name}_temp_path ${join(dir, name)};`;
  writeFileSync(
    join(dir, 'nginx.conf'),
    `daemon off;
master_process off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'logs', 'error.log')} error;
events { worker_connections 4096; }
http {
  access_log off;
  ${temp('client_body')} ${temp('proxy')} ${temp('fastcgi')} ${temp('uwsgi')} ${temp('scgi')}
  upstream provider { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://provider;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`,
  );
  const proc = spawn('nginx', ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PATH } });
  pinServer(proc.pid);
  // Listening once a connection is accepted (bounded: 5 s).
  const deadline = Date.now() + 5_000;
  for (;;) {
    const up = await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => false);
    if (up) break;
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`nginx did not start on port ${port} within 5 s (see ${join(dir, 'logs', 'error.log')})`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    proc,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGKILL');
      }),
  };
}

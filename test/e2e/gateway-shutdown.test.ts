import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';

test('graceful shutdown: connections closed with 1001 and every close callback delivered before exit', async (t) => {
  const dir = tempDir();
  const app = await WsApp.start();
  const pier = await PierProcess.start(pierEnv(join(dir, 'data')));
  t.teardown(async () => {
    await pier.stop('SIGKILL');
    await app.stop();
    cleanup(dir);
  });
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);
  const clients = await Promise.all([1, 2, 3].map(() => connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token })));
  await app.until(() => app.accepted.filter((k) => k.body.action === 'open').length === 3);

  const code = await pier.stop('SIGTERM');
  t.is(code, 0);
  for (const c of clients) t.is((await c.closed).code, 1001);
  // Delivered before the process exited: nothing can deliver them after.
  t.is(app.accepted.filter((k) => k.body.action === 'close').length, 3);
});

import test from 'ava';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { WsApp, wsManifest } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';
import { until } from '../helpers/wait.js';

test('sidecar mode: the local API serves one app without headers, on loopback', async (t) => {
  const dir = tempDir();
  const app = await WsApp.start();
  const pier = await PierProcess.start(pierEnv(join(dir, 'data')), ['--app', 'alice/chat']);
  t.teardown(async () => {
    await pier.stop();
    await app.stop();
    cleanup(dir);
  });
  const local = (path: string, body?: unknown) =>
    fetch(`http://127.0.0.1:${pier.ports!.local}${path}`, { method: body === undefined ? 'GET' : 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

  const early = await local('/runtime/ws/conn/list');
  t.is(early.status, 503, 'the app is not installed yet');

  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);

  const c = await connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token });
  const listed: any = await until('the connection to be listed', async () => {
    const l = await (await local('/runtime/ws/conn/list')).json();
    return l?.data?.length ? l : undefined;
  });
  t.is(listed.data[0].name, 'alice');
  t.like((await (await local('/runtime/ws/conn/send', { payload: 'no headers needed', users: ['alice'] })).json()).data, { delivered: 1 });
  await until('the message at the browser', () => c.received.includes('"no headers needed"'));
  c.ws.close();
});

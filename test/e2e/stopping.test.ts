import test from 'ava';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { until, within } from '../helpers/wait.js';
import { wsManifest } from '../helpers/ws-app.js';
import { connect } from '../helpers/ws-client.js';

// Stopping (issue: operator experience): the first SIGINT/SIGTERM stops within PIER_STOP_TIMEOUT_MS
// even while an app never answers a gateway callback, says what it waits for, logs "pier stopped"
// and exits 130 (SIGINT) or 0 (SIGTERM); a second signal stops at once (exit 1).

/** An app backend that takes callbacks and never answers them. */
async function silentApp(): Promise<{ server: Server; port: number; requests: () => number }> {
  let n = 0;
  const server = createServer(() => n++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as { port: number }).port, requests: () => n };
}

async function pierWithPendingCallback(t: { teardown: (f: () => void) => void }) {
  const dir = tempDir();
  const app = await silentApp();
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_STOP_TIMEOUT_MS: '3000' }));
  t.teardown(() => {
    void pier.stop('SIGKILL');
    app.server.closeAllConnections();
    app.server.close();
    cleanup(dir);
  });
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', app.port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);
  const client = await until('the gateway to take alice\'s connection', () => connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token }).catch(() => undefined));
  client.ws.send('hello');
  await until('the open callback to be pending at the app', () => app.requests() > 0);
  return pier;
}

// 'close', not 'exit': the process's last log lines (its stop's report, "pier stopped") may still be
// in the pipe when 'exit' comes (CI, two tests with both cores busy: exit 0, those lines not read yet).
const exited = (pier: PierProcess) => within('pier to exit and its output to be read', new Promise<number | null>((resolve) => pier.proc.once('close', (code) => resolve(code))), 30_000);

test('SIGINT with a callback the app never answers: stops within the bound, says so, "pier stopped", exit 130', async (t) => {
  const pier = await pierWithPendingCallback(t);
  const exit = exited(pier);
  pier.proc.kill('SIGINT');
  t.is(await exit, 130);
  t.regex(pier.stderr, /SIGINT: stopping \(within 3000 ms; a second signal stops at once\)/);
  t.regex(pier.logs, /"msg":"pier stopped"/);
});

test('a second signal stops at once: exit 1, and it says so', async (t) => {
  const pier = await pierWithPendingCallback(t);
  const exit = exited(pier);
  pier.proc.kill('SIGTERM');
  await until('the first signal to be heard', () => pier.stderr.includes('SIGTERM: stopping'));
  pier.proc.kill('SIGTERM');
  t.is(await exit, 1);
  t.regex(pier.stderr, /SIGTERM again: stopping now/);
});

test('a second signal of another kind is named as such: SIGTERM after SIGINT', async (t) => {
  const pier = await pierWithPendingCallback(t);
  const exit = exited(pier);
  pier.proc.kill('SIGINT');
  await until('the first signal to be heard', () => pier.stderr.includes('SIGINT: stopping'));
  pier.proc.kill('SIGTERM');
  t.is(await exit, 1);
  t.regex(pier.stderr, /SIGTERM after SIGINT: stopping now/);
  t.notRegex(pier.stderr, /SIGTERM again/);
});

// Issue #53: with the app's callback target down, a stop took 6.5 s of PIER_STOP_TIMEOUT_MS's 8: the
// edge waited 5 s for events its app could not take, then the callback role 1.5 s more. The edge now
// leaves them with the callback role that took them (here, this process's), which reports them.
test('a callback target that is down (refusing connections) does not hold the stop: it ends well within its bound, naming the app whose callbacks were left', async (t) => {
  const dir = tempDir();
  // A port nothing listens on: every callback attempt is refused at once.
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as { port: number }).port;
  await new Promise<void>((r) => closed.close(() => r()));
  // A bound far above what the stop needs: ending within it is not a race with a busy machine.
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_STOP_TIMEOUT_MS: '20000' }));
  t.teardown(() => {
    void pier.stop('SIGKILL');
    cleanup(dir);
  });
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const token = (await cli(['user', 'add', 'alice', '--json'], env)).json.token;
  writeFileSync(join(dir, 'chat.yaml'), wsManifest('chat', port));
  await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml')], env);
  const client = await until('the gateway to take alice\'s connection', () => connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token }).catch(() => undefined));
  client.ws.send('hello');
  const retried = async () => Number(/^pier_callbacks_retried_total\S* (\d+)/m.exec(await (await fetch(`${pier.adminUrl}/metrics`)).text())?.[1] ?? 0);
  await until('the callback to have been refused and retried', async () => (await retried()) > 0);
  const exit = exited(pier);
  const started = performance.now();
  pier.proc.kill('SIGTERM');
  t.is(await exit, 0);
  t.log(`stopped in ${Math.round(performance.now() - started)} ms (bound 20000)`);
  t.notRegex(pier.logs, /gave up waiting/, 'the stop ended within its own bound');
  // The edge did not wait for the app: it left the events with this process's callback role...
  const handed = pier.logs.split('\n').filter((l) => l.includes('left with the callback role of this process')).map((l) => JSON.parse(l));
  t.is(handed.length, 1, pier.logs);
  t.true(handed[0].events >= 2, 'the message and the close');
  // ...which says, per app, what it could not deliver: the events' fate, told.
  const left = pier.logs.split('\n').filter((l) => l.includes('callbacks left undelivered at stop')).map((l) => JSON.parse(l));
  t.is(left.length, 1, pier.logs);
  t.is(left[0].app, 'alice/chat');
  t.is(left[0].events, handed[0].events, 'every event the edge left is reported');
});

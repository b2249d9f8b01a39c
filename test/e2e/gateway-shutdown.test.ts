import test from 'ava';
import { join } from 'node:path';
import { cleanup, failedStart, pierEnv, tempDir } from '../helpers/pier.js';
import { until } from '../helpers/wait.js';
import { connect } from '../helpers/ws-client.js';
import { gatewayFixture } from '../helpers/ws-setup.js';

test('graceful shutdown: connections closed with 1001 and every close callback delivered before exit', async (t) => {
  const { pier, app, token, teardown } = await gatewayFixture();
  t.teardown(teardown);
  const clients = await Promise.all([1, 2, 3].map(() => connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token })));
  await app.until(() => app.accepted.filter((k) => k.body.action === 'open').length === 3);

  const code = await pier.stop('SIGTERM');
  t.is(code, 0);
  for (const c of clients) t.is((await c.closed).code, 1001);
  // Delivered before the process exited: nothing can deliver them after.
  t.is(app.accepted.filter((k) => k.body.action === 'close').length, 3);
});

test('drain (PIER_DRAIN_MS): a stopping edge first answers /readyz 503 while it still serves its connections, then closes them with 1001', async (t) => {
  const { pier, app, token, teardown } = await gatewayFixture({ PIER_DRAIN_MS: '1500', PIER_STOP_TIMEOUT_MS: '8000' });
  t.teardown(teardown);
  const client = await connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token });
  await app.until(() => app.accepted.some((k) => k.body.action === 'open'));
  let closedAt: number | null = null;
  void client.closed.then(() => (closedAt = Date.now()));
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${pier.ports!.public}/readyz`);
    return { status: res.status, connection: res.headers.get('connection'), body: (await res.json()) as { message: string } };
  };
  const before = await readyz();
  t.is(before.status, 200);
  t.not(before.connection, 'close', 'kept alive while the edge runs');
  const exit = pier.stop('SIGTERM');
  // What a load balancer's check sees: not ready, naming why, while the connection is still served.
  const draining = await until('the edge to answer /readyz 503 while draining', async () => {
    const r = await readyz().catch(() => null);
    return r?.status === 503 ? r : undefined;
  });
  t.regex(draining.body.message, /draining: this process is stopping/);
  // Every answer of a draining edge ends its connection: a client's next request opens a new one,
  // which the balancer sends to another edge, instead of reusing one bound to this edge.
  t.is(draining.connection, 'close');
  t.is(closedAt, null, 'the open connection is still served while the balancer is told');
  client.ws.send(JSON.stringify({ event: 'chat', data: { text: 'during the drain' } }));
  await app.until(() => app.accepted.some((k) => k.body.action === 'message'));
  t.is(await exit, 0);
  t.is((await client.closed).code, 1001, 'then closed as going away: the client reconnects elsewhere');
  t.regex(pier.logs, /"msg":"edge draining: \/readyz answers 503, the listeners close after"/);
});

test('a drain as long as the whole stop bound is refused at start, naming both settings', async (t) => {
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const r = await failedStart(pierEnv(join(dir, 'data'), { PIER_DRAIN_MS: '8000', PIER_STOP_TIMEOUT_MS: '8000' }));
  t.is(r.code, 1);
  t.regex(r.stderr, /^pier: PIER_DRAIN_MS: must be less than PIER_STOP_TIMEOUT_MS \(8000\), which bounds the whole stop\n$/);
});

import test from 'ava';
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

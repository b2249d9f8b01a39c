import test from 'ava';
import { connect } from '../helpers/ws-client.js';
import { gatewayFixture } from '../helpers/ws-setup.js';
import { until } from '../helpers/wait.js';

test('an app that keeps failing: its event is retried, then dropped and counted; later events still come, in order', async (t) => {
  let failing = true;
  const { pier, app, token, teardown } = await gatewayFixture({ PIER_CALLBACK_RETRY_MS: '1500' }, { fail: () => failing });
  t.teardown(teardown);

  const c = await connect(pier.ports!.public, 'chat.alice.localhost', { 'x-authorization': token });
  c.ws.send(JSON.stringify({ event: 'lost', data: {} }));
  // open and the first message are refused again and again for the whole retry period.
  await app.until(() => app.refused >= 6);
  const metrics = async () => (await fetch(`${pier.adminUrl}/metrics`)).text();
  const text = await until('the dropped message to be counted', async () => {
    const m = await metrics();
    return /pier_callbacks_dropped_total\{[^}]*action="message"[^}]*\} 1/.test(m) ? m : undefined;
  }, 30_000, 100);
  t.regex(text, /pier_callbacks_dropped_total\{[^}]*action="open"[^}]*\} 1/);
  t.regex(text, /pier_callbacks_retried_total\{[^}]*\} \d+/);
  t.regex(pier.logs, /gateway callback dropped after retries/);

  failing = false;
  c.ws.send(JSON.stringify({ event: 'kept', data: { n: 1 } }));
  c.ws.send(JSON.stringify({ event: 'kept', data: { n: 2 } }));
  c.ws.close();
  await app.until(() => app.accepted.some((k) => k.body.action === 'close'));
  t.deepEqual(
    app.accepted.map((k) => [k.headers['x-pier-seq'], k.body.action, (k.body.data as { data?: { n?: number } }).data?.n ?? null]),
    [
      ['3', 'message', 1],
      ['4', 'message', 2],
      ['5', 'close', null],
    ],
  );
});

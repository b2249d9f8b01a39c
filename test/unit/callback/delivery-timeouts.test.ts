import test from 'ava';
import { createServer, type Server } from 'node:http';
import { Deliverer } from '../../../actors/callback/delivery.js';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { AddressPolicy } from '../../../lib/policy/address-policy.js';
import { until, within } from '../../helpers/wait.js';

// A callback POST to an app that never answers ends at the callback timeout, or at once when its
// connection is handed over to another replica (actors/callback/delivery.ts).

const ev: GatewayEvent = { eventId: 'e1.c:1', connId: 'e00000000001.BBBBBBBBBBBBBBBBBBBBBB', edge: 'e00000000001', user: 'alice', app: 'chat', seq: 1, oldest: 1, action: 'message', data: {}, cookie: null };

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

test('an app that never answers: each attempt ends at the callback timeout (undici\'s timers tick every half second: up to a second late), and the event is dropped when the retry time is over', async (t) => {
  let attempts = 0;
  const app = createServer(() => attempts++); // never answers
  const port = await listen(app);
  const d = new Deliverer({ timeoutMs: 150, retryMs: 3_000, now: Date.now }, { retried: () => undefined }, new AddressPolicy(() => new Set(), null));
  t.teardown(async () => {
    await d.close(100);
    app.closeAllConnections();
    await new Promise((r) => app.close(r));
  });
  const outcome = await within('the delivery to give up', d.deliver(ev, { host: '127.0.0.1', port, url: '/cb' }, async () => 'secret'), 10_000);
  t.is(outcome, 'dropped');
  t.true(attempts >= 2, `each attempt cut at its timeout and retried (${attempts} attempts)`);
});

test('an app that never answers: a hand-over abandons the attempt on the wire at once, long before its timeout', async (t) => {
  let attempts = 0;
  const app = createServer(() => attempts++);
  const port = await listen(app);
  const d = new Deliverer({ timeoutMs: 60_000, retryMs: 120_000, now: Date.now }, { retried: () => undefined }, new AddressPolicy(() => new Set(), null));
  t.teardown(async () => {
    await d.close(100);
    app.closeAllConnections();
    await new Promise((r) => app.close(r));
  });
  const handOver = new AbortController();
  const outcome = d.deliver(ev, { host: '127.0.0.1', port, url: '/cb' }, async () => 'secret', undefined, handOver.signal);
  await until('the attempt to reach the app', () => attempts === 1, 5_000);
  handOver.abort();
  t.is(await within('the delivery to stop at the hand-over (its timeout is a minute away)', outcome, 5_000), 'handedOver');
});

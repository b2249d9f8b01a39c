import test, { type ExecutionContext } from 'ava';
import { createServer, type Server } from 'node:http';
import { Deliverer } from '../../../actors/callback/delivery.js';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { AddressPolicy } from '../../../lib/policy/address-policy.js';
import { until, within } from '../../helpers/wait.js';

// A callback POST to an app that never answers ends at the callback timeout, or at once when its
// connection is handed over to another replica (actors/callback/delivery.ts).

const ev: GatewayEvent = { eventId: 'e1.c:1', connId: 'e00000000001.BBBBBBBBBBBBBBBBBBBBBB', edge: 'e00000000001', user: 'alice', app: 'chat', seq: 1, oldest: 1, action: 'message', data: {}, cookie: null };

/** An app that takes every request and never answers, and a deliverer to it; both closed at teardown. */
async function silentApp(t: ExecutionContext, timeoutMs: number, retryMs: number) {
  const app = { attempts: 0, port: 0 };
  const server: Server = createServer(() => app.attempts++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  app.port = (server.address() as { port: number }).port;
  const d = new Deliverer({ timeoutMs, retryMs, now: Date.now }, { retried: () => undefined }, new AddressPolicy(() => new Set(), null));
  t.teardown(async () => {
    await d.close(100);
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { app, d, target: { host: '127.0.0.1', port: app.port, url: '/cb' } };
}

test('an app that never answers: each attempt ends at the callback timeout (undici\'s timers tick every half second: up to a second late), and the event is dropped when the retry time is over', async (t) => {
  const { app, d, target } = await silentApp(t, 150, 3_000);
  const outcome = await within('the delivery to give up', d.deliver(ev, target, async () => 'secret'), 10_000);
  t.is(outcome, 'dropped');
  t.true(app.attempts >= 2, `each attempt cut at its timeout and retried (${app.attempts} attempts)`);
});

test('an app that never answers: a hand-over abandons the attempt on the wire at once, long before its timeout', async (t) => {
  const { app, d, target } = await silentApp(t, 60_000, 120_000);
  const handOver = new AbortController();
  const outcome = d.deliver(ev, target, async () => 'secret', undefined, handOver.signal);
  await until('the attempt to reach the app', () => app.attempts === 1, 5_000);
  handOver.abort();
  t.is(await within('the delivery to stop at the hand-over (its timeout is a minute away)', outcome, 5_000), 'handedOver');
});

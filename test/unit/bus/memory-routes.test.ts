import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import type { BusMessage } from '../../../bus/bus.js';
import { until } from '../../helpers/wait.js';
import { patience } from '../../helpers/time.js';

// The in-process bus remembers who hears each subject (bus/memory-routes.ts) and answers requests
// through one-shot waiters. What it remembers must never outlive a change of subscriptions.

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (m: BusMessage) => new TextDecoder().decode(m.data);

test('a subscription made or removed after a subject was published to changes who hears it next time', async (t) => {
  const bus = new MemoryBus();
  const heard: string[] = [];
  // Each delivery runs before the next change (a subscription removed hears nothing still queued).
  const send = async (s: string) => {
    bus.publish('a.b', bytes(s));
    await bus.flush();
  };
  await send('nobody yet');
  const exact = bus.subscribe('a.b', (m) => heard.push(`exact ${text(m)}`));
  await send('1');
  const wild = bus.subscribe('a.*', (m) => heard.push(`wild ${text(m)}`));
  await send('2');
  exact.unsubscribe();
  await send('3');
  wild.unsubscribe();
  await send('4');
  t.deepEqual(heard.sort(), ['exact 1', 'exact 2', 'wild 2', 'wild 3'], 'who heard what (the order between two subscriptions is not promised)');
  await bus.close();
});

test('a queue group still gets each message once, spread over its members, with the route remembered', async (t) => {
  const bus = new MemoryBus();
  const counts = [0, 0, 0];
  for (let i = 0; i < 3; i++) bus.subscribe('work.x', () => counts[i]++, { queue: 'q' });
  let plain = 0;
  bus.subscribe('work.>', () => plain++);
  for (let i = 0; i < 300; i++) bus.publish('work.x', bytes(String(i)));
  await bus.flush();
  t.is(counts[0] + counts[1] + counts[2], 300);
  t.true(counts.every((c) => c > 30), `each member got a share: ${counts.join(', ')}`);
  t.is(plain, 300);
  await bus.close();
});

test('requests: the first answer settles, a second reaches nobody; a wildcard on inboxes still hears replies', async (t) => {
  const bus = new MemoryBus();
  bus.subscribe('svc.echo', (m) => {
    bus.publish(m.reply!, bytes(`re:${text(m)}`));
    bus.publish(m.reply!, bytes('again'));
  });
  t.is(text(await bus.request('svc.echo', bytes('one'), { timeoutMs: patience(10_000) })), 're:one');
  const spied: string[] = [];
  const spy = bus.subscribe('_INBOX.>', (m) => spied.push(text(m)));
  t.is(text(await bus.request('svc.echo', bytes('two'), { timeoutMs: patience(10_000) })), 're:two');
  await bus.flush();
  t.deepEqual(spied, ['re:two', 'again'], 'a wildcard subscription matching inboxes hears the replies too');
  spy.unsubscribe();
  await bus.close();
});

test('a request nobody answers times out and leaves no waiter: a late answer is dropped', async (t) => {
  const bus = new MemoryBus();
  let reply = '';
  bus.subscribe('svc.slow', (m) => (reply = m.reply!));
  await t.throwsAsync(bus.request('svc.slow', bytes('x'), { timeoutMs: 50 }), { message: /timed out/ });
  // On a busy event loop (a worker running many tests) the 50 ms may pass before the request is delivered.
  await until('the request delivered', () => reply !== '');
  t.notThrows(() => bus.publish(reply, bytes('late')));
  await bus.flush();
  t.is((bus as unknown as { replies: Map<string, unknown> }).replies.size, 0);
  await bus.close();
});

test("subjects are still checked: a forged inbox-like subject is refused, the bus's own inboxes pass", (t) => {
  const bus = new MemoryBus();
  const inbox = bus.inbox();
  t.notThrows(() => bus.publish(inbox, bytes('ok')));
  t.throws(() => bus.publish(`${inbox} x`, bytes('no')), { instanceOf: TypeError });
  t.throws(() => bus.publish(`${inbox}.*`, bytes('no')), { instanceOf: TypeError });
  t.throws(() => bus.publish('a..b', bytes('no')), { instanceOf: TypeError });
});

test('a subject is checked before any route is kept for it: requests to a malformed one are refused as such, every time', async (t) => {
  const bus = new MemoryBus();
  bus.subscribe('svc.>', () => undefined);
  for (let i = 0; i < 2; i++) {
    await t.throwsAsync(bus.request('svc..x', bytes('no'), { timeoutMs: 100 }), { instanceOf: TypeError }, `request ${i}`);
    await t.throwsAsync(bus.requestMany('svc.*', bytes('no'), { timeoutMs: 100, stallMs: 10 }), { instanceOf: TypeError }, `requestMany ${i}`);
    t.throws(() => bus.publish('svc.x y', bytes('no')), { instanceOf: TypeError }, `publish ${i}`);
  }
  // A good subject, once routed, keeps passing.
  t.notThrows(() => bus.publish('svc.ok', bytes('a')));
  t.notThrows(() => bus.publish('svc.ok', bytes('b')));
});

test('routes are bounded: subjects naming many connections never grow the memory past 10,000, and deliveries stay right', async (t) => {
  const bus = new MemoryBus();
  let heard = 0;
  bus.subscribe('conn.*.send', () => heard++);
  for (let i = 0; i < 25_000; i++) bus.publish(`conn.c${i}.send`, bytes('x'));
  await bus.flush();
  t.is(heard, 25_000);
  const kept = (bus as unknown as { table: { routes: Map<string, unknown> } }).table.routes.size;
  t.true(kept <= 10_000, `routes kept: ${kept}`);
  // An early subject, forgotten or not, still reaches a subscription made after it.
  const late: string[] = [];
  bus.subscribe('conn.c0.send', (m) => late.push(text(m)));
  bus.publish('conn.c0.send', bytes('again'));
  await bus.flush();
  t.deepEqual(late, ['again']);
  await bus.close();
});

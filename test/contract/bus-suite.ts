import type { TestFn } from 'ava';
import type { Bus, BusMessage } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { until } from '../helpers/wait.js';
import { patience } from '../helpers/time.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

/** Collects messages until `count` arrived or `ms` passed (then resolves with what it has). */
function collect(bus: Bus, subject: string, count: number, ms = 2000, queue?: string): { done: Promise<BusMessage[]>; unsubscribe(): void } {
  const got: BusMessage[] = [];
  let finish!: (v: BusMessage[]) => void;
  const done = new Promise<BusMessage[]>((r) => (finish = r));
  const timer = setTimeout(() => finish(got), ms);
  const sub = bus.subscribe(
    subject,
    (m) => {
      got.push(m);
      if (got.length === count) {
        clearTimeout(timer);
        finish(got);
      }
    },
    { queue },
  );
  return { done, unsubscribe: () => sub.unsubscribe() };
}

/** A pair of bus handles on one backend: a publisher's and a subscriber's. */
export type MakePair = () => Promise<[Bus, Bus]>;

/**
 * The bus contract (bus/bus.ts). Every implementation runs exactly these cases. Subjects carry a
 * per-test prefix so tests sharing a server never see each other's messages.
 */
export function busContract(test: TestFn, name: string, pair: MakePair): void {
  let n = 0;
  const prefix = () => `t${process.pid}x${++n}`;

  test(`${name}: publish reaches a subscriber, bytes intact`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    const c = collect(sub, `${p}.a`, 1);
    await sub.flush();
    pub.publish(`${p}.a`, enc('hello'));
    const [m] = await c.done;
    t.is(dec(m.data), 'hello');
    t.is(m.subject, `${p}.a`);
  });

  test(`${name}: * matches exactly one token`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    const c = collect(sub, `${p}.*.end`, 10, 500);
    await sub.flush();
    for (const s of [`${p}.x.end`, `${p}.y.end`, `${p}.x.y.end`, `${p}.end`, `${p}.x.other`]) pub.publish(s, enc(s));
    t.deepEqual((await c.done).map((m) => m.subject).sort(), [`${p}.x.end`, `${p}.y.end`]);
  });

  test(`${name}: > matches one or more trailing tokens`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    const c = collect(sub, `${p}.a.>`, 10, 500);
    await sub.flush();
    for (const s of [`${p}.a`, `${p}.a.b`, `${p}.a.b.c`, `${p}.b.c`]) pub.publish(s, enc(s));
    t.deepEqual((await c.done).map((m) => m.subject).sort(), [`${p}.a.b`, `${p}.a.b.c`]);
  });

  test(`${name}: a queue group gets each message once; plain subscribers get all`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    const total = 200;
    const members = [collect(sub, `${p}.q`, total, 1500, 'workers'), collect(pub, `${p}.q`, total, 1500, 'workers'), collect(sub, `${p}.q`, total, 1500, 'workers')];
    const plain = collect(sub, `${p}.q`, total, 3000);
    await sub.flush();
    await pub.flush();
    for (let i = 0; i < total; i++) pub.publish(`${p}.q`, enc(String(i)));
    const received = (await Promise.all(members.map((m) => m.done))).flat().map((m) => Number(dec(m.data)));
    t.is(received.length, total);
    t.deepEqual([...new Set(received)].sort((a, b) => a - b), Array.from({ length: total }, (_, i) => i));
    t.is((await plain.done).length, total);
  });

  test(`${name}: order per publisher and subject is kept`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    const total = 2000;
    const c = collect(sub, `${p}.ord`, total, 5000);
    await sub.flush();
    for (let i = 0; i < total; i++) pub.publish(`${p}.ord`, enc(String(i)));
    const got = (await c.done).map((m) => Number(dec(m.data)));
    t.deepEqual(got, Array.from({ length: total }, (_, i) => i));
  });

  test(`${name}: request gets the reply, with headers both ways`, async (t) => {
    const [client, server] = await pair();
    const p = prefix();
    server.subscribe(`${p}.echo`, (m) => {
      server.publish(m.reply!, enc(`re:${dec(m.data)}`), { headers: { 'x-answer': `to-${m.headers?.['x-trace']}` } });
    });
    await server.flush();
    const reply = await client.request(`${p}.echo`, enc('ping'), { timeoutMs: patience(10_000), headers: { 'x-trace': 'abc' } });
    t.is(dec(reply.data), 're:ping');
    t.is(reply.headers?.['x-answer'], 'to-abc');
  });

  test(`${name}: requestMany gathers every subscriber's answer; nobody subscribed is an empty list`, async (t) => {
    const [client, server] = await pair();
    const p = prefix();
    for (const who of ['a', 'b', 'c']) server.subscribe(`${p}.many`, (m) => server.publish(m.reply!, enc(who)));
    await server.flush();
    const replies = await client.requestMany(`${p}.many`, enc('?'), { timeoutMs: patience(10_000), stallMs: 200, expected: 3 });
    t.deepEqual(replies.map((r) => dec(r.data)).sort(), ['a', 'b', 'c']);
    t.deepEqual(await client.requestMany(`${p}.nobody`, enc('?'), { timeoutMs: 60_000, stallMs: 60_000 }), []);
  });

  // A gathered request carries headers too: the wire format's version slot travels there (bus/envelope.ts).
  test(`${name}: requestMany carries its headers to every subscriber`, async (t) => {
    const [client, server] = await pair();
    const p = prefix();
    for (const who of ['a', 'b']) server.subscribe(`${p}.hdr`, (m) => server.publish(m.reply!, enc(`${who}:${m.headers?.['pier-v'] ?? 'none'}`)));
    await server.flush();
    const replies = await client.requestMany(`${p}.hdr`, enc('?'), { timeoutMs: patience(10_000), stallMs: 200, expected: 2, headers: { 'pier-v': '2' } });
    t.deepEqual(replies.map((r) => dec(r.data)).sort(), ['a:2', 'b:2']);
  });

  test(`${name}: request with nobody subscribed fails at once with UNAVAILABLE`, async (t) => {
    const [client] = await pair();
    // A deadline would end in TIMEOUT; UNAVAILABLE proves the request did not wait for it.
    const err = await t.throwsAsync(client.request(`${prefix()}.nobody`, enc('x'), { timeoutMs: 60_000 }));
    t.true(err instanceof PierError);
    t.is((err as PierError).code, 'UNAVAILABLE');
  });

  test(`${name}: request nobody answers fails with TIMEOUT at the deadline`, async (t) => {
    const [client, server] = await pair();
    const p = prefix();
    server.subscribe(`${p}.silent`, () => undefined);
    await server.flush();
    const err = await t.throwsAsync(client.request(`${p}.silent`, enc('x'), { timeoutMs: 200 }));
    t.is((err as PierError).code, 'TIMEOUT');
  });

  test(`${name}: unsubscribe stops delivery`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    let count = 0;
    const s = sub.subscribe(`${p}.u`, () => count++);
    await sub.flush();
    let marked = false;
    sub.subscribe(`${p}.marker`, () => (marked = true));
    await sub.flush();
    pub.publish(`${p}.u`, enc('1'));
    await pub.flush();
    await until('the first message', () => count === 1);
    s.unsubscribe();
    await sub.flush();
    pub.publish(`${p}.u`, enc('2'));
    // One publisher's messages reach one subscriber in order: once the marker sent after '2' has
    // arrived, '2' would have too.
    pub.publish(`${p}.marker`, enc('m'));
    await pub.flush();
    await until('the marker published after the second message', () => marked);
    t.is(count, 1);
  });

  test(`${name}: invalid subjects are refused`, async (t) => {
    const [pub] = await pair();
    t.throws(() => pub.publish('a.*', enc('x')));
    t.throws(() => pub.publish('a..b', enc('x')));
    t.throws(() => pub.subscribe('a.>.b', () => undefined));
    t.throws(() => pub.publish('has space', enc('x')));
  });

  test(`${name}: a throwing subscriber does not stop other deliveries`, async (t) => {
    const [pub, sub] = await pair();
    const p = prefix();
    sub.subscribe(`${p}.boom`, () => {
      throw new Error('subscriber bug');
    });
    const c = collect(sub, `${p}.boom`, 3);
    await sub.flush();
    for (let i = 0; i < 3; i++) pub.publish(`${p}.boom`, enc(String(i)));
    t.is((await c.done).length, 3);
  });
}

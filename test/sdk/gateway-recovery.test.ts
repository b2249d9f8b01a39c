import test from 'ava';
import { createServer } from 'node:http';
import { connectGateway, type GatewayConnection, type GatewayOptions, type RecoveryInfo, type WebSocketLike } from '@pier/sdk/browser';
import { PierApp, ServerError } from '@pier/sdk/server';
import { until } from '../helpers/wait.js';

/**
 * The browser SDK's history and recovery (docs/protocol.md "History and recovery") against fake
 * sockets, no Pier: the `recover` parameter on each connection's URL, the recovery frame consumed
 * and emitted, wrapped messages unwrapped and never delivered twice, the fallback to raw frames
 * when an edge ignores `recover`, and malformed frames that must not break the connection. Then
 * the server SDK's send receipt against a fake local API.
 */

/** A socket the test drives: the SDK's handlers are called as a browser's WebSocket would call them. */
class FakeSocket implements WebSocketLike {
  readyState = 0;
  readonly sent: string[] = [];
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;

  constructor(readonly url: string) {}

  send(data: string): void {
    this.sent.push(data);
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }

  /** The upgrade succeeded. */
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  /** A text frame from the edge; objects are sent as their JSON. */
  frame(data: unknown): void {
    this.onmessage?.({ data: typeof data === 'string' ? data : JSON.stringify(data) });
  }

  /** The network went away (not a final close: the SDK reconnects). */
  drop(): void {
    this.close(1006, '');
  }
}

/** A connection on fake sockets, with everything it emitted recorded. */
function fakeConnection(url: string, options: GatewayOptions = {}) {
  const sockets: FakeSocket[] = [];
  const conn = connectGateway(url, {
    socketFactory: (u) => {
      const s = new FakeSocket(u);
      sockets.push(s);
      return s;
    },
    reconnect: { baseMs: 1, maxMs: 2 },
    pingIntervalMs: 60_000,
    ...options,
  });
  const messages: unknown[] = [];
  const recoveries: RecoveryInfo[] = [];
  conn.on('message', (m) => void messages.push(m));
  conn.on('recovery', (r) => void recoveries.push(r));
  return { conn, sockets, messages, recoveries, latest: () => sockets.at(-1)! };
}

/** Waits for the connection's next socket (after a drop) and opens it. */
async function reconnected(fake: ReturnType<typeof fakeConnection>, count: number): Promise<FakeSocket> {
  await until(`socket number ${count}`, () => fake.sockets.length >= count, 5_000, 2);
  const socket = fake.sockets[count - 1];
  socket.open();
  return socket;
}

const recovery = (data: Record<string, unknown>) => ({ event: 'pier.recovery', data });
const wrapped = (payload: unknown, offset?: unknown) => ({ event: 'pier.message', data: offset === undefined ? { payload } : { offset, payload } });

test('a recovering connection: recover= first, the recovery frame consumed and emitted, messages unwrapped, none twice, the reconnect asks from the last seen', async (t) => {
  const fake = fakeConnection('ws://chat.alice.localhost/ws');
  const conn: GatewayConnection = fake.conn;
  t.teardown(() => conn.close());
  t.is(fake.latest().url, 'ws://chat.alice.localhost/ws?recover=', 'a first connection opts in without a position');
  t.is(conn.recovered, null);
  t.is(conn.position, null);

  const first = fake.latest();
  first.open();
  first.frame(recovery({ recovered: false, epoch: 'lx2k9a-3f9c01d2', offset: 10, missed: 0, reason: 'new' }));
  t.deepEqual(fake.recoveries, [{ recovered: false, epoch: 'lx2k9a-3f9c01d2', offset: 10, missed: 0, reason: 'new' }]);
  t.deepEqual(fake.messages, [], 'the recovery frame is not a message');
  t.false(conn.recovered);
  t.deepEqual(conn.position, { epoch: 'lx2k9a-3f9c01d2', offset: 10 });

  first.frame(wrapped({ event: 'welcome' })); // sent to the connection: not kept, no offset
  first.frame(wrapped({ text: 'a' }, 11));
  first.frame(wrapped({ text: 'a again' }, 11)); // a duplicate by offset
  first.frame(wrapped({ text: 'older' }, 9)); // below the position
  first.frame(wrapped('{"looks":"like json"}', 12)); // a string payload stays a string
  first.frame('{"event":"pong"}');
  t.deepEqual(fake.messages, [{ event: 'welcome' }, { text: 'a' }, '{"looks":"like json"}']);
  t.deepEqual(conn.position, { epoch: 'lx2k9a-3f9c01d2', offset: 12 });

  first.drop();
  const second = await reconnected(fake, 2);
  t.is(second.url, 'ws://chat.alice.localhost/ws?recover=lx2k9a-3f9c01d2:12', 'the reconnect asks for what came after the last message seen');
  // Two were missed: the frame's offset is where the replay ends, so the replay must not be taken for duplicates.
  second.frame(recovery({ recovered: true, epoch: 'lx2k9a-3f9c01d2', offset: 20, missed: 2 }));
  t.true(conn.recovered);
  t.deepEqual(fake.recoveries.at(-1), { recovered: true, epoch: 'lx2k9a-3f9c01d2', offset: 20, missed: 2 });
  second.frame(wrapped({ text: 'missed 1' }, 15));
  second.frame(wrapped({ text: 'missed 2' }, 20));
  second.frame(wrapped({ text: 'missed 2 again' }, 20));
  second.frame(wrapped({ text: 'live' }, 21));
  t.deepEqual(fake.messages.slice(3), [{ text: 'missed 1' }, { text: 'missed 2' }, { text: 'live' }]);
  t.deepEqual(conn.position, { epoch: 'lx2k9a-3f9c01d2', offset: 21 });

  // Lost in the middle of a replay: the next connection asks for the rest, from the last one seen.
  second.drop();
  const third = await reconnected(fake, 3);
  t.is(third.url, 'ws://chat.alice.localhost/ws?recover=lx2k9a-3f9c01d2:21');
  third.frame(recovery({ recovered: true, epoch: 'lx2k9a-3f9c01d2', offset: 30, missed: 3 }));
  third.frame(wrapped({ text: 'r1' }, 25));
  third.drop();
  const fourth = await reconnected(fake, 4);
  t.is(fourth.url, 'ws://chat.alice.localhost/ws?recover=lx2k9a-3f9c01d2:25', 'a replay cut short resumes after the last replayed message');

  // A new epoch (history lost): the server's position is taken, whatever the old offsets were.
  fourth.frame(recovery({ recovered: false, epoch: 'new-epoch', offset: 3, missed: 0, reason: 'epoch' }));
  fourth.frame(wrapped({ text: 'after the new epoch' }, 4));
  t.deepEqual(fake.messages.at(-1), { text: 'after the new epoch' });
  t.deepEqual(conn.position, { epoch: 'new-epoch', offset: 4 });
  t.deepEqual(fake.recoveries.map((r) => r.reason), ['new', undefined, undefined, 'epoch']);
});

test('the URL keeps its other query parameters and replaces a recover already in it', (t) => {
  const withQuery = fakeConnection('ws://h.localhost/ws?room=a%20b&x=1');
  t.teardown(() => withQuery.conn.close());
  t.is(withQuery.latest().url, 'ws://h.localhost/ws?room=a%20b&x=1&recover=');
  const stale = fakeConnection('ws://h.localhost/ws?recover=old:5&room=a');
  t.teardown(() => stale.conn.close());
  t.is(stale.latest().url, 'ws://h.localhost/ws?room=a&recover=');
  const trailing = fakeConnection('ws://h.localhost/ws?');
  t.teardown(() => trailing.conn.close());
  t.is(trailing.latest().url, 'ws://h.localhost/ws?recover=');
});

test('an edge without recovery (no recovery frame first): frames delivered raw, as before; the position forgotten', async (t) => {
  const fake = fakeConnection('ws://h.localhost/ws');
  t.teardown(() => fake.conn.close());
  const first = fake.latest();
  first.open();
  first.frame(recovery({ recovered: true, epoch: 'E', offset: 7, missed: 0 }));
  t.deepEqual(fake.conn.position, { epoch: 'E', offset: 7 });
  first.drop();

  // The reconnect lands on an older edge: it ignored `recover` and sends the app's payloads as they are.
  const old = await reconnected(fake, 2);
  t.is(old.url, 'ws://h.localhost/ws?recover=E:7');
  old.frame({ event: 'welcome', data: { motto: 'm' } });
  old.frame(wrapped('not unwrapped', 8)); // the app's own payload that happens to look wrapped
  old.frame(recovery({ recovered: true, epoch: 'E', offset: 9, missed: 0 })); // only a first frame can be one
  old.frame('plain text');
  t.deepEqual(fake.messages, [{ event: 'welcome', data: { motto: 'm' } }, wrapped('not unwrapped', 8), recovery({ recovered: true, epoch: 'E', offset: 9, missed: 0 }), 'plain text']);
  t.is(fake.recoveries.length, 1, 'no recovery event for the old edge');
  t.is(fake.conn.position, null, 'which kept messages the old edge delivered is unknown');
  t.true(fake.conn.recovered, 'recovered stays the last recovery frame’s');
  old.drop();
  const next = await reconnected(fake, 3);
  t.is(next.url, 'ws://h.localhost/ws?recover=', 'asks as a first connection, not from a position it cannot vouch for');
});

test('a pong before the recovery frame does not decide the connection', (t) => {
  const fake = fakeConnection('ws://h.localhost/ws');
  t.teardown(() => fake.conn.close());
  const socket = fake.latest();
  socket.open();
  socket.frame('{"event":"pong"}');
  socket.frame(recovery({ recovered: false, epoch: null, offset: null, missed: 0, reason: 'off' }));
  socket.frame(wrapped({ n: 1 }));
  t.deepEqual(fake.recoveries, [{ recovered: false, epoch: null, offset: null, missed: 0, reason: 'off' }]);
  t.deepEqual(fake.messages, [{ n: 1 }]);
  t.is(fake.conn.position, null, 'history off: no position');
});

test('recover: false adds no query parameter and reads every frame raw', (t) => {
  const fake = fakeConnection('ws://h.localhost/ws?room=a', { recover: false });
  t.teardown(() => fake.conn.close());
  const socket = fake.latest();
  t.is(socket.url, 'ws://h.localhost/ws?room=a');
  socket.open();
  socket.frame(recovery({ recovered: true, epoch: 'E', offset: 1, missed: 0 }));
  socket.frame(wrapped(1, 2));
  t.deepEqual(fake.messages, [recovery({ recovered: true, epoch: 'E', offset: 1, missed: 0 }), wrapped(1, 2)]);
  t.deepEqual(fake.recoveries, []);
  t.is(fake.conn.recovered, null);
  t.is(fake.conn.position, null);
});

test('hostile frames on a recovering connection: a bad offset delivers the payload without moving the position; a frame without data is delivered raw; nothing breaks', (t) => {
  const fake = fakeConnection('ws://h.localhost/ws');
  t.teardown(() => fake.conn.close());
  const socket = fake.latest();
  socket.open();
  socket.frame(recovery({ recovered: true, epoch: 'E', offset: 5, missed: 0 }));
  socket.frame(wrapped('string offset', '7'));
  socket.frame('{"event":"pier.message","data":{"offset":1e999,"payload":"infinite offset"}}');
  socket.frame(wrapped('negative offset', -1));
  socket.frame(wrapped('fractional offset', 6.5));
  socket.frame({ event: 'pier.message' });
  socket.frame({ event: 'pier.message', data: 5 });
  socket.frame({ event: 'pier.message', data: { offset: 6 } });
  socket.frame({ event: 'pier.message', data: null });
  socket.frame('{"event":"pier.message","data":');
  socket.frame(recovery({ recovered: true, epoch: 'X', offset: 99, missed: 0 })); // a second one: not Pier's, handed on
  t.deepEqual(fake.messages, [
    'string offset',
    'infinite offset',
    'negative offset',
    'fractional offset',
    { event: 'pier.message' },
    { event: 'pier.message', data: 5 },
    { event: 'pier.message', data: { offset: 6 } },
    { event: 'pier.message', data: null },
    '{"event":"pier.message","data":',
    recovery({ recovered: true, epoch: 'X', offset: 99, missed: 0 }),
  ]);
  t.deepEqual(fake.conn.position, { epoch: 'E', offset: 5 }, 'no malformed frame moved the position');
  t.is(fake.recoveries.length, 1);
  socket.frame(wrapped('still working', 6));
  t.is(fake.messages.at(-1), 'still working');
  t.is(fake.conn.state, 'open');

  // A malformed recovery frame first is not taken for one: the connection is read raw.
  const other = fakeConnection('ws://h.localhost/ws');
  t.teardown(() => other.conn.close());
  other.latest().open();
  other.latest().frame({ event: 'pier.recovery', data: { epoch: 'E' } });
  other.latest().frame(wrapped('raw', 1));
  t.deepEqual(other.messages, [{ event: 'pier.recovery', data: { epoch: 'E' } }, wrapped('raw', 1)]);
  t.deepEqual(other.recoveries, []);
});

test('the server SDK: sendWithReceipt answers the whole receipt, send still the number; an older Pier is read as not kept', async (t) => {
  const answers: unknown[] = [
    { code: 0, data: { delivered: 2, kept: true, offset: 1208, epoch: 'lx2k9a-3f9c01d2' } },
    { code: 0, data: { delivered: 1, kept: true, offset: 1209, epoch: 'lx2k9a-3f9c01d2' } },
    { code: 0, data: { delivered: 1 } },
    { code: 0, data: { delivered: 1, kept: false, offset: 4, epoch: 'E' } },
  ];
  const bodies: unknown[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      bodies.push({ path: req.url, key: req.headers['x-app-key'], body: JSON.parse(body) });
      const answer = answers.shift();
      if (answer === undefined) return void res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 503, message: 'history unavailable' }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => void server.close());
  const app = new PierApp({ systemServer: '127.0.0.1:1', appKey: 'k', appSecret: 's', gatewayUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}` });

  t.deepEqual(await app.gateway.sendWithReceipt({ users: ['alice', 'bob'] }, { text: 'hi' }), { delivered: 2, kept: true, offset: 1208, epoch: 'lx2k9a-3f9c01d2' });
  t.is(await app.gateway.send({ users: ['alice'] }, 1), 1, 'send answers delivered, as before');
  t.deepEqual(await app.gateway.sendWithReceipt({ connId: 'c1' }, 'x'), { delivered: 1, kept: false }, 'a Pier before history');
  t.deepEqual(await app.gateway.sendWithReceipt({ connId: 'c1' }, 'x'), { delivered: 1, kept: false }, 'no offset for what was not kept');
  await t.throwsAsync(app.gateway.sendWithReceipt({ users: ['alice'] }, 'x'), { instanceOf: ServerError });
  t.deepEqual(bodies.slice(0, 3), [
    { path: '/runtime/ws/conn/send', key: 'k', body: { payload: { text: 'hi' }, users: ['alice', 'bob'] } },
    { path: '/runtime/ws/conn/send', key: 'k', body: { payload: 1, users: ['alice'] } },
    { path: '/runtime/ws/conn/send', key: 'k', body: { payload: 'x', conn_id: 'c1' } },
  ]);
});

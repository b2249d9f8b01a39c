import test from 'ava';
import { CLOSE_CODES } from '../../../bus/subjects.js';
import type { Connections, Ws } from '../../../edge/gateway/gateway-connections.js';
import { Delivery, MAX_GATHERED } from '../../../edge/gateway/gateway-delivery.js';
import type { GatewayMetrics } from '../../../edge/gateway/gateway-metrics.js';
import { until } from '../../helpers/wait.js';

/** A uWS WebSocket as Delivery uses it: what it wrote, in how many corked writes, and its close. */
class FakeSocket {
  readonly frames: string[] = [];
  corks = 0;
  closedWith: number | null = null;
  /** Like uWS after a close: any use throws. */
  gone = false;
  readonly data: { open: boolean; user: string; app: string; recover?: unknown };

  constructor(
    readonly id: string,
    private readonly onEnd: (s: FakeSocket) => void,
  ) {
    this.data = { open: true, user: 'alice', app: 'chat' };
  }

  private check(): void {
    if (this.gone) throw new Error('Invalid access of closed uWS.WebSocket');
  }

  getUserData() {
    this.check();
    return this.data;
  }

  cork(fn: () => void): void {
    this.check();
    this.corks++;
    fn();
  }

  send(text: string): boolean {
    this.check();
    this.frames.push(text);
    return true;
  }

  getBufferedAmount(): number {
    this.check();
    return 0;
  }

  end(code: number): void {
    this.check();
    this.closedWith = code;
    this.data.open = false;
    this.onEnd(this);
    this.gone = true;
  }
}

/** Delivery over three fake connections of alice's chat; `onClose` is what the gateway's close handler does. */
function fixture() {
  const sockets: FakeSocket[] = [];
  let delivery: Delivery;
  const onEnd = (s: FakeSocket) => delivery.forget(s as unknown as Ws);
  for (const id of ['c1', 'c2', 'c3']) sockets.push(new FakeSocket(id, onEnd));
  const connections = {
    socketsOf: (id: string) => (id === 'alice/chat' ? sockets.filter((s) => !s.gone) : []),
    get: (id: string) => sockets.find((s) => s.id === id && !s.gone),
  } as unknown as Connections;
  let out = 0;
  const metrics = { messagesOut: { inc: (n = 1) => (out += n) } } as unknown as GatewayMetrics;
  delivery = new Delivery(connections, metrics, 1024 * 1024);
  return { delivery, sockets, sent: () => out };
}

const turn = () => new Promise((r) => setImmediate(r));

test('kept messages of one loop turn reach each connection in one write, in order; counted once written', async (t) => {
  const { delivery, sockets, sent } = fixture();
  for (let seq = 1; seq <= 8; seq++) delivery.sendToChain('alice/chat', `"m${seq}"`, seq);
  t.true(sockets.every((s) => s.frames.length === 0), 'nothing written before the turn ends');
  await until('the turn to end and every connection to have its eight', () => sockets.every((s) => s.frames.length === 8));
  for (const s of sockets) {
    t.deepEqual(s.frames, Array.from({ length: 8 }, (_, i) => `"m${i + 1}"`));
    t.is(s.corks, 1, `${s.id}: one corked write for the burst`);
  }
  t.is(sent(), 24);
});

test('an app\'s send by id, or its close, comes after the kept messages gathered before it', async (t) => {
  const { delivery, sockets } = fixture();
  delivery.sendToChain('alice/chat', '"kept"', 1);
  delivery.command({ op: 'send', appId: 'alice/chat', connIds: ['c1'], text: '"direct"' });
  t.deepEqual(sockets[0]!.frames, ['"kept"', '"direct"']);
  delivery.sendToChain('alice/chat', '"last"', 2);
  delivery.command({ op: 'close', appId: 'alice/chat', connIds: ['c2'] });
  t.deepEqual(sockets[1]!.frames, ['"kept"', '"last"']);
  t.is(sockets[1]!.closedWith, CLOSE_CODES.CLOSED_BY_APP, 'closed by the app after its messages');
  await turn();
  t.deepEqual(sockets[2]!.frames, ['"kept"', '"last"'], 'the connection not named got both at the turn\'s end');
});

test('hostile: a connection closed before the turn ends gets nothing and breaks nothing; one closed without its handler neither', async (t) => {
  const { delivery, sockets } = fixture();
  delivery.sendToChain('alice/chat', '"a"', 1);
  sockets[0]!.end(1000); // its close handler forgets it
  sockets[1]!.gone = true; // closed, and uWS has not called the handler yet
  await turn();
  t.deepEqual(sockets[0]!.frames, []);
  t.deepEqual(sockets[1]!.frames, []);
  t.deepEqual(sockets[2]!.frames, ['"a"'], 'the others still get theirs');
});

test('hostile: a flood of kept messages in one turn is bounded per connection: written early past the bound, all in order', async (t) => {
  const { delivery, sockets } = fixture();
  const n = MAX_GATHERED * 3 + 5;
  for (let seq = 1; seq <= n; seq++) delivery.sendToChain('alice/chat', String(seq), seq);
  t.is(sockets[0]!.frames.length, MAX_GATHERED * 3, 'whole batches went out before the turn ended');
  await turn();
  for (const s of sockets) t.deepEqual(s.frames, Array.from({ length: n }, (_, i) => String(i + 1)));
  t.is(sockets[0]!.corks, 4);
});

test('a send to users that is not kept is gathered too: counted at once, written at the turn\'s end, before a later send by id', async (t) => {
  const { delivery, sockets } = fixture();
  t.deepEqual(delivery.command({ op: 'send', appId: 'alice/chat', users: ['alice'], text: '"to all"' }), { count: 3 });
  t.deepEqual(delivery.command({ op: 'send', appId: 'alice/chat', users: ['bob'], text: '"not hers"' }), { count: 0 }, 'another user names none of alice\'s');
  t.true(sockets.every((s) => s.frames.length === 0));
  delivery.command({ op: 'send', appId: 'alice/chat', connIds: ['c3'], text: '"direct"' });
  t.deepEqual(sockets[2]!.frames, ['"to all"', '"direct"']);
  await turn();
  for (const s of sockets.slice(0, 2)) t.deepEqual(s.frames, ['"to all"']);
});

test('hostile: large messages gathered in one turn are bounded in bytes too: past the outbound limit a connection\'s are written early', (t) => {
  const { delivery, sockets } = fixture();
  const big = `"${'x'.repeat(300 * 1024)}"`;
  for (let seq = 1; seq <= 4; seq++) delivery.sendToChain('alice/chat', big, seq);
  // 1 MiB limit: the fourth message passes it, so all four go out now, before the turn ends.
  t.is(sockets[0]!.frames.length, 4);
  t.is(sockets[0]!.corks, 1);
});

import { at, exchange, shared } from '../../../bus/exchange.js';
import { ask, hear, serve, tell } from '../../../bus/verbs.js';
import { onRefusal } from '../../../bus/envelope.js';
import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { decode } from '../../../bus/codec.js';
import { PierError } from '../../../bus/errors.js';
import { GuardedBus } from '../../../bus/guarded.js';
import { permissionsFor } from '../../../cli/roles.js';
import { within } from '../../helpers/wait.js';

// Endpoints declared `shared` take their request as a value within one process (bus.requestLocal):
// the same answers, errors, rights, deadlines and order as bytes, without the codec.

interface Req {
  n: number;
  tags: string[];
}
const sharedEp = shared(exchange<Req, { n: number; seen: Req }>({ subject: 'x.shared', queue: 'x', request: { n: 'number', tags: { type: 'array', items: 'string' } }, timeoutMs: 1_000 }));
const bytesEp = exchange<Req, { n: number; seen: Req }>({ subject: 'x.bytes', queue: 'x', request: { n: 'number', tags: { type: 'array', items: 'string' } }, timeoutMs: 1_000 });

test('a shared endpoint in one process gets the very request and answers by reference; a plain one gets a copy', async (t) => {
  const bus = new MemoryBus(undefined, false);
  serve(bus, sharedEp, (req) => ({ n: req.n + 1, seen: req }));
  serve(bus, bytesEp, (req) => ({ n: req.n + 1, seen: req }));
  const req = { n: 1, tags: ['a'] };
  const viaShared = await ask(bus, sharedEp, req);
  t.is(viaShared.n, 2);
  t.is(viaShared.seen, req, 'no codec: the handler saw the caller\'s object');
  const viaBytes = await ask(bus, bytesEp, req);
  t.is(viaBytes.n, 2);
  t.not(viaBytes.seen, req);
  t.deepEqual(viaBytes.seen, req);
  await bus.close();
});

test('a shared endpoint\'s errors arrive as they would over a wire: typed ones as they are, unknown ones with nothing of themselves', async (t) => {
  const bus = new MemoryBus(undefined, false);
  serve(bus, sharedEp, (req) => {
    if (req.n === 1) throw new PierError('CONFLICT', 'busy', { data: { version: 3 } });
    throw new Error('a bug at /srv/secret/path');
  });
  const typed = await t.throwsAsync(ask(bus, sharedEp, { n: 1, tags: [] }), { instanceOf: PierError });
  t.is(typed!.code, 'CONFLICT');
  t.is(typed!.message, 'busy');
  t.deepEqual(typed!.data, { version: 3 });
  const unknown = await t.throwsAsync(ask(bus, sharedEp, { n: 2, tags: [] }), { instanceOf: PierError });
  t.is(unknown!.code, 'INTERNAL');
  t.false(unknown!.message.includes('/srv/secret'));
  // The caller's check still comes first: an invalid request never reaches the handler.
  const invalid = await t.throwsAsync(ask(bus, sharedEp, { n: 'x', tags: [] } as unknown as Req), { instanceOf: PierError });
  t.is(invalid!.code, 'BAD_REQUEST');
  await bus.close();
});

test('a tap on the subject sees the request as bytes: a shared endpoint goes by value only when nobody else listens', async (t) => {
  const bus = new MemoryBus(undefined, false);
  serve(bus, sharedEp, (req) => ({ n: req.n + 1, seen: req }));
  const tapped: unknown[] = [];
  bus.subscribe('x.>', (msg) => tapped.push(decode(msg.data)));
  const req = { n: 5, tags: ['t'] };
  const answer = await ask(bus, sharedEp, req);
  t.is(answer.n, 6);
  t.not(answer.seen, req, 'went as bytes');
  t.deepEqual(tapped, [req]);
  await bus.close();
});

test('a role without the right to call a shared endpoint is refused in-process as on a wire', async (t) => {
  const bus = new MemoryBus(undefined, false);
  const vaultView = new GuardedBus(bus, 'vault', permissionsFor(['vault'], '_INBOX'));
  const vaultOp = shared(exchange<Req, { n: number }>({ subject: 'pier.vault.op', queue: 'vault', request: { n: 'number', tags: 'array' }, timeoutMs: 1_000 }));
  serve(vaultView, vaultOp, (req) => ({ n: req.n }));
  const tokenView = new GuardedBus(bus, 'token', permissionsFor(['token'], '_INBOX'));
  await t.throwsAsync(ask(tokenView, vaultOp, { n: 1, tags: [] }), { message: /role token may not publish pier.vault.op/ });
  const edgeView = new GuardedBus(bus, 'edge', permissionsFor(['edge'], '_INBOX'));
  t.deepEqual(await ask(edgeView, vaultOp, { n: 7, tags: [] }), { n: 7 });
  await bus.close();
});

test('a shared endpoint that never answers times out at its deadline; one that is gone answers UNAVAILABLE', async (t) => {
  const bus = new MemoryBus(undefined, false);
  const slow = shared(exchange<Req, { n: number }>({ subject: 'x.slow', queue: 'x', request: { n: 'number', tags: 'array' }, timeoutMs: 200 }));
  const sub = serve(bus, slow, () => new Promise<never>(() => undefined));
  const late = await t.throwsAsync(within('the deadline', ask(bus, slow, { n: 1, tags: [] }), 5_000), { instanceOf: PierError });
  t.is(late!.code, 'TIMEOUT');
  sub.unsubscribe();
  const gone = await t.throwsAsync(ask(bus, slow, { n: 1, tags: [] }), { instanceOf: PierError });
  t.is(gone!.code, 'UNAVAILABLE');
  t.regex(gone!.message, /no x replica is running/);
  await bus.close();
});

test('a shared request keeps its place in the one queue: an event published before it is heard before it is handled', async (t) => {
  const bus = new MemoryBus(undefined, false);
  const order: string[] = [];
  const ev = exchange<{ n: number }>({ subject: 'x.ev', request: { n: 'number' }, oneWay: true });
  hear(bus, ev, (v) => order.push(`event ${v.n}`));
  serve(bus, sharedEp, (req) => {
    order.push(`call ${req.n}`);
    return { n: req.n, seen: req };
  });
  tell(bus, ev, { n: 1 });
  const answered = ask(bus, sharedEp, { n: 2, tags: [] });
  tell(bus, ev, { n: 3 });
  await answered;
  await bus.flush();
  t.deepEqual(order, ['event 1', 'call 2', 'event 3']);
  await bus.close();
});

test('with PIER_FREEZE_SHARED a handler that changes the request it shares fails where it does so, and so does a caller changing the answer', async (t) => {
  const bus = new MemoryBus(undefined, true);
  serve(bus, sharedEp, (req) => {
    if (req.n === 1) req.tags.push('changed');
    return { n: req.n, seen: req };
  });
  const changed = await t.throwsAsync(ask(bus, sharedEp, { n: 1, tags: [] }), { instanceOf: PierError });
  t.is(changed!.code, 'INTERNAL');
  const answer = await ask(bus, sharedEp, { n: 2, tags: ['x'] });
  t.throws(() => {
    (answer as { n: number }).n = 3;
  }, { instanceOf: TypeError });
  // Bytes cannot be frozen and are passed as they are.
  const bytes = shared(exchange<{ b: Uint8Array }, { b: Uint8Array }>({ subject: 'x.b', queue: 'x', request: { b: 'any' }, timeoutMs: 1_000 }));
  serve(bus, bytes, (req) => ({ b: req.b }));
  const b = new Uint8Array([1, 2]);
  t.is((await ask(bus, bytes, { b })).b, b);
  await bus.close();
});

// The refusal listener is the process's one: the tests that set it run one at a time.
test.serial('a shared channel: by reference in one process, the request and the reply still checked against their schemas', async (t) => {
  const bus = new MemoryBus(undefined, false);
  const refusals: string[] = [];
  onRefusal((subject, reason) => refusals.push(`${subject} ${reason}`));
  const ch = exchange<{ n: number }, { n: number }>({ request: { n: 'number' }, reply: { n: 'number' }, timeoutMs: 300, shared: true });
  let seen: unknown;
  serve(bus, at(ch, 'x.ch.good'), (req) => ((seen = req), { n: req.n + 1 }));
  serve(bus, at(ch, 'x.ch.bad'), () => ({ n: 'not a number' }) as unknown as { n: number });
  serve(bus, at(ch, 'x.ch.typed'), () => {
    throw new PierError('CONFLICT', 'busy');
  });
  const req = { n: 1 };
  t.deepEqual(await ask(bus, at(ch, 'x.ch.good'), req), { n: 2 });
  t.is(seen, req, 'no codec: the answerer saw the asker\'s object');
  const bad = await t.throwsAsync(ask(bus, at(ch, 'x.ch.bad'), { n: 1 }), { instanceOf: PierError });
  t.is(bad!.code, 'BAD_GATEWAY');
  const typed = await t.throwsAsync(ask(bus, at(ch, 'x.ch.typed'), { n: 1 }), { instanceOf: PierError });
  t.is(typed!.code, 'CONFLICT');
  // One rule for every exchange (issue 38): a request failing its schema is refused before it leaves,
  // 400 naming the field (channels used to leave it to the receiver, and the asker to its deadline).
  const refused = await t.throwsAsync(within('the refusal', ask(bus, at(ch, 'x.ch.good'), { n: 'x' } as unknown as { n: number }), 5_000), { instanceOf: PierError });
  t.is(refused!.code, 'BAD_REQUEST');
  t.regex(refused!.message, /^n: /);
  t.deepEqual(refusals, [], 'it never reached the receiver');
  onRefusal(() => undefined);
  await bus.close();
});

test.serial('the serving side checks a shared request against its own schema, in the turn it handles it: a weaker declaration elsewhere or a change after sending gets nowhere', async (t) => {
  const bus = new MemoryBus(undefined, false);
  const refusals: string[] = [];
  onRefusal((subject, reason) => refusals.push(`${subject} ${reason}`));
  let handled = 0;
  serve(bus, sharedEp, (req) => (handled++, { n: req.n, seen: req }));
  // The same subject declared again with no schema: the caller's check passes, the server's does not.
  const weaker = shared(exchange<{ n: unknown }, unknown>({ subject: 'x.shared', queue: 'x', request: {}, timeoutMs: 1_000 }));
  const refused = await t.throwsAsync(ask(bus, weaker, { n: 'not a number' }), { instanceOf: PierError });
  t.is(refused!.code, 'BAD_REQUEST');
  // Changed by its caller after the check and before the handler's turn.
  const req = { n: 1, tags: [] as string[] };
  const pending = ask(bus, sharedEp, req);
  (req as { n: unknown }).n = 'changed';
  const late = await t.throwsAsync(pending, { instanceOf: PierError });
  t.is(late!.code, 'BAD_REQUEST');
  t.is(handled, 0);
  t.deepEqual(refusals, ['x.shared schema', 'x.shared schema']);
  onRefusal(() => undefined);
  await bus.close();
});

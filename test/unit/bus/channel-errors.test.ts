import { at, exchange } from '../../../bus/exchange.js';
import { ask, gather, serve } from '../../../bus/verbs.js';
import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { PierError } from '../../../bus/errors.js';
import { receiveBytes, sendPiece } from '../../../bus/byte-stream.js';
import { pieces } from '../../../bus/subjects-stream.js';
import { within } from '../../helpers/wait.js';
import { patience } from '../../helpers/time.js';

// One reply convention (issue: renovation): a handler behind answerOn that throws is answered at
// once with its typed error, as serve() does, instead of leaving the requester to its deadline.
const ch = exchange<{ n: number }, { n: number }>({ request: { n: 'number' }, reply: { n: 'number' }, timeoutMs: 60_000 });

test('a thrower behind answerOn: the requester gets the typed error (not a TIMEOUT after the deadline)', async (t) => {
  const bus = new MemoryBus();
  serve(bus, at(ch, 'x.typed'), () => {
    throw new PierError('CONFLICT', 'upload busy');
  });
  serve(bus, at(ch, 'x.unknown'), () => {
    throw new Error('secret detail /srv/data');
  });
  const typed = await t.throwsAsync(ask(bus, at(ch, 'x.typed'), { n: 1 }), { instanceOf: PierError });
  t.is(typed!.code, 'CONFLICT');
  t.is(typed!.message, 'upload busy');
  const unknown = await t.throwsAsync(ask(bus, at(ch, 'x.unknown'), { n: 1 }), { instanceOf: PierError });
  t.is(unknown!.code, 'INTERNAL');
  t.false(unknown!.message.includes('/srv/data'), 'an unknown failure tells nothing of itself');
  await bus.close();
});

test('scatter-gather keeps the answers and drops the failures', async (t) => {
  const bus = new MemoryBus();
  serve(bus, at(ch, 'x.all'), (req) => ({ n: req.n + 1 }));
  serve(bus, at(ch, 'x.all'), () => {
    throw new PierError('UNAVAILABLE', 'not now');
  });
  t.deepEqual(await gather(bus, at(ch, 'x.all'), { n: 1 }, { timeoutMs: patience(10_000), stallMs: 100, expected: 2 }), [{ n: 2 }]);
  await bus.close();
});

test('a thrower behind receivePieces: the sender hears the typed error as its ack, not a TIMEOUT', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 60_000);
  receiveBytes(bus, stream, 'x.pieces', async (piece) => {
    if (piece.seq === 0) throw new PierError('CONFLICT', 'upload busy');
    throw new Error('a bug with /srv/detail');
  });
  const send = (seq: number) => sendPiece(bus, at(stream, 'x.pieces'), { seq, kind: 'data', data: new Uint8Array([1]) }).then((o) => ({ ok: o.ok, ...(o.ok ? {} : { error: o.error.toWire() }) }) as { ok: boolean; error?: ReturnType<PierError['toWire']> });
  const typed = await within('the typed ack', send(0), 5_000);
  t.deepEqual(typed, { ok: false, error: { code: 'CONFLICT', message: 'upload busy' } });
  const unknown = await within('the internal ack', send(1), 5_000);
  t.is(unknown.error!.code, 'INTERNAL');
  t.false(unknown.error!.message.includes('/srv/detail'));
  await bus.close();
});

import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { answerOn, askOn, channel, gatherOn } from '../../../bus/channel.js';
import { PierError } from '../../../bus/errors.js';
import { receivePieces, sendPiece } from '../../../bus/pieces.js';
import { within } from '../../helpers/wait.js';

// One reply convention (issue: renovation): a handler behind answerOn that throws is answered at
// once with its typed error, as serve() does, instead of leaving the requester to its deadline.
const ch = channel<{ n: number }, { n: number }>({ n: 'number' }, { n: 'number' }, 60_000);

test('a thrower behind answerOn: the requester gets the typed error (not a TIMEOUT after the deadline)', async (t) => {
  const bus = new MemoryBus();
  answerOn(bus, ch, 'x.typed', () => {
    throw new PierError('CONFLICT', 'upload busy');
  });
  answerOn(bus, ch, 'x.unknown', () => {
    throw new Error('secret detail /srv/data');
  });
  const typed = await t.throwsAsync(askOn(bus, ch, 'x.typed', { n: 1 }), { instanceOf: PierError });
  t.is(typed!.code, 'CONFLICT');
  t.is(typed!.message, 'upload busy');
  const unknown = await t.throwsAsync(askOn(bus, ch, 'x.unknown', { n: 1 }), { instanceOf: PierError });
  t.is(unknown!.code, 'INTERNAL');
  t.false(unknown!.message.includes('/srv/data'), 'an unknown failure tells nothing of itself');
  await bus.close();
});

test('scatter-gather keeps the answers and drops the failures', async (t) => {
  const bus = new MemoryBus();
  answerOn(bus, ch, 'x.all', (req) => ({ n: req.n + 1 }));
  answerOn(bus, ch, 'x.all', () => {
    throw new PierError('UNAVAILABLE', 'not now');
  });
  t.deepEqual(await gatherOn(bus, ch, 'x.all', { n: 1 }, { timeoutMs: 1_000, stallMs: 100, expected: 2 }), [{ n: 2 }]);
  await bus.close();
});

test('a thrower behind receivePieces: the sender hears the typed error as its ack, not a TIMEOUT', async (t) => {
  const bus = new MemoryBus();
  receivePieces(bus, 'x.pieces', async (piece) => {
    if (piece.seq === 0) throw new PierError('CONFLICT', 'upload busy');
    throw new Error('a bug with /srv/detail');
  });
  const typed = await within('the typed ack', sendPiece(bus, 'x.pieces', 0, 'data', new Uint8Array([1]), 60_000), 5_000);
  t.deepEqual(typed, { ok: false, error: { code: 'CONFLICT', message: 'upload busy' } });
  const unknown = await within('the internal ack', sendPiece(bus, 'x.pieces', 1, 'data', new Uint8Array([1]), 60_000), 5_000);
  t.is(unknown.error!.code, 'INTERNAL');
  t.false(unknown.error!.message.includes('/srv/detail'));
  await bus.close();
});

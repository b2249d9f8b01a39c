import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { OLDEST_WIRE_VERSION, WIRE_VERSION } from '../../../bus/envelope.js';
import { ErrorReasons, PierError } from '../../../bus/errors.js';
import { at, exchange } from '../../../bus/exchange.js';
import { ask, serve } from '../../../bus/verbs.js';
import { within } from '../../helpers/wait.js';

// docs/operations.md "Upgrading": a message says its wire format; a receiver answers every format
// it speaks and refuses the others by name, at once, never by letting the sender time out.
const ch = exchange<{ n: number }, { n: number }>({ request: { n: 'number' }, reply: { n: 'number' }, timeoutMs: 60_000 });

test('every format from the oldest to the newest this process speaks is answered', async (t) => {
  const bus = new MemoryBus();
  t.teardown(() => bus.close());
  serve(bus, at(ch, 'w.echo'), (req) => ({ n: req.n + 1 }));
  for (let wire = OLDEST_WIRE_VERSION; wire <= WIRE_VERSION; wire++) t.deepEqual(await ask(bus, at(ch, 'w.echo'), { n: wire }, { wire }), { n: wire + 1 }, `format ${wire}`);
});

test('hostile: a format past the newest spoken, or a header that is no format, is refused by name well before the deadline', async (t) => {
  const bus = new MemoryBus();
  t.teardown(() => bus.close());
  let handled = 0;
  serve(bus, at(ch, 'w.echo'), (req) => (handled++, { n: req.n }));
  for (const wire of [WIRE_VERSION + 1, WIRE_VERSION + 2]) {
    const err = await within(`the refusal of format ${wire}`, t.throwsAsync(ask(bus, at(ch, 'w.echo'), { n: 1 }, { wire }), { instanceOf: PierError }), 5_000);
    t.is(err!.reason, ErrorReasons.UNSUPPORTED_VERSION);
    t.is(err!.message, `w.echo: wire format ${wire} is not spoken here (${OLDEST_WIRE_VERSION} to ${WIRE_VERSION})`);
  }
  const garbled = await bus.request('w.echo', new Uint8Array([0x80]), { timeoutMs: 5_000, headers: { 'pier-v': 'two' } });
  t.truthy(garbled.data.length, 'answered, not left to time out');
  t.is(handled, 0, 'nothing of another format reached the handler');
});

import test from 'ava';
import { decode, encode } from '../../../bus/codec.js';
import { ErrorReasons, PierError, type WireError } from '../../../bus/errors.js';

test('a reason crosses the wire with its error; code decides on it, whatever the message says', (t) => {
  const sent = new PierError('CONFLICT', 'upload busy', { reason: ErrorReasons.UPLOAD_BUSY });
  const received = PierError.fromWire(decode<WireError>(encode(sent.toWire())));
  t.true(received.is(ErrorReasons.UPLOAD_BUSY));
  // Reworded: still the same failure to code.
  t.true(PierError.fromWire({ code: 'CONFLICT', message: 'someone else is writing this upload', reason: 'upload_busy' }).is(ErrorReasons.UPLOAD_BUSY));
  // The text alone is not the failure.
  t.false(PierError.fromWire({ code: 'CONFLICT', message: 'upload busy' }).is(ErrorReasons.UPLOAD_BUSY));
  t.deepEqual(new PierError('BAD_REQUEST', 'x').toWire(), { code: 'BAD_REQUEST', message: 'x' }, 'no reason, no field');
});

test('hostile: a reason this process does not know (a newer peer, or a forged one) is dropped; the class holds', (t) => {
  const e = PierError.fromWire({ code: 'BAD_REQUEST', message: 'm', reason: 'made_up' } as unknown as WireError);
  t.is(e.reason, undefined);
  t.is(e.code, 'BAD_REQUEST');
  t.is(PierError.fromWire({ code: 'BAD_REQUEST', message: 'm', reason: { toString: 1 } } as unknown as WireError).reason, undefined);
});

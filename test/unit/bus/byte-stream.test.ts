import test from 'ava';
import { MemoryBus } from '../../../bus/bus-memory.js';
import { AnswerLater, bufferSource, CHUNK_BYTES, MAX_WAITING_PIECES, offerBytes, pushBytes, receiveBytes, sendPiece, takeBytes } from '../../../bus/byte-stream.js';
import { pieces, streamSubject, type Piece } from '../../../bus/subjects-stream.js';
import { PierError } from '../../../bus/errors.js';
import { at, exchange } from '../../../bus/exchange.js';
import { ask } from '../../../bus/verbs.js';
import { until, within } from '../../helpers/wait.js';
import { patience } from '../../helpers/time.js';

// The one byte stream (issue 38): upload pieces and provider bodies both travel on it.

const drain = async (it: AsyncIterable<Uint8Array>) => {
  const parts: Uint8Array[] = [];
  for await (const p of it) parts.push(p);
  return Buffer.concat(parts);
};

test('an offered stream reaches its taker byte for byte, in pieces no larger than CHUNK_BYTES', async (t) => {
  const bus = new MemoryBus();
  const body = Buffer.alloc(3 * CHUNK_BYTES + 17, 7);
  body.writeUInt32BE(0xdeadbeef, body.byteLength - 4);
  const offer = offerBytes(bus, 'edge', 'provider', bufferSource(body), 5_000);
  const got = await within('the whole stream', drain(takeBytes(bus, 'provider', offer.subject, 5_000)), 10_000);
  t.true(got.equals(body));
  await within('the offer to finish', offer.finished, 5_000);
  await bus.close();
});

test('the window bounds what is unanswered: a receiver that holds its answers stops the sender at `window` pieces', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 5_000);
  const held: Array<() => void> = [];
  let seen = 0;
  receiveBytes(bus, stream, 'x.window', (piece) => {
    seen++;
    if (piece.kind !== 'data') return Promise.resolve({});
    return new Promise((resolve) => held.push(() => resolve({})));
  });
  // receiveBytes takes pieces one after the other: count what reached the bus instead.
  let published = 0;
  bus.subscribe('x.window', () => published++);
  const pushed = pushBytes(bus, at(stream, 'x.window'), bufferSource(Buffer.alloc(10 * CHUNK_BYTES)), { window: 3, timeoutMs: 5_000 });
  // The first three, then 200 ms for a fourth that must not come (waited for, not assumed sent
  // within a fixed time: the worker's event loop may be busy with other tests).
  await until('three pieces sent', () => published >= 3);
  await new Promise((r) => setTimeout(r, 200));
  t.is(published, 3, 'three pieces sent, none more while none is answered');
  t.is(seen, 1, 'the receiver handles them in order, one at a time');
  const deadline = Date.now() + 5_000; // what it waits for: every piece answered, and the end sent
  while ((held.length > 0 || published < 11) && Date.now() < deadline) {
    held.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  await within('the push to end', pushed, 5_000);
  t.is(published, 11, 'ten pieces and the end');
  await bus.close();
});

test('a source that fails aborts the stream, and its taker throws the source\'s own error (a 413 stays a 413)', async (t) => {
  const bus = new MemoryBus();
  async function* failing() {
    yield Buffer.alloc(CHUNK_BYTES);
    throw new PierError('PAYLOAD_TOO_LARGE', 'answer of provider "p" is larger than 10 bytes');
  }
  const offer = offerBytes(bus, 'provider', 'edge', failing(), 5_000);
  const err = await t.throwsAsync(within('the failure', drain(takeBytes(bus, 'edge', offer.subject, 5_000)), 10_000), { instanceOf: PierError });
  t.is(err!.code, 'PAYLOAD_TOO_LARGE');
  t.regex(err!.message, /larger than 10 bytes/);
  await bus.close();
});

test('hostile: an offer pushes only to a stream subject of the role it was made for, and only once', async (t) => {
  const bus = new MemoryBus();
  const offer = offerBytes(bus, 'edge', 'provider', bufferSource(Buffer.from('the caller\'s body')), 5_000);
  const take = exchange<{ to: string }, Record<string, never>>({ request: { to: 'string' }, reply: {} });
  // A thief of the provider's credentials aims the edge's push (with the edge's rights) at an actor's endpoint.
  const elsewhere = await t.throwsAsync(ask(bus, at(take, offer.subject), { to: 'pier.upload.create' }), { instanceOf: PierError });
  t.is(elsewhere!.code, 'BAD_REQUEST', 'not a stream subject: refused by the schema');
  const ownRole = await t.throwsAsync(ask(bus, at(take, offer.subject), { to: streamSubject('edge', 'a'.repeat(24)) }), { instanceOf: PierError });
  t.is(ownRole!.code, 'FORBIDDEN', 'a stream subject of the offering role itself');
  t.deepEqual(await drain(takeBytes(bus, 'provider', offer.subject, 5_000)), Buffer.from('the caller\'s body'));
  const again = await t.throwsAsync(drain(takeBytes(bus, 'provider', offer.subject, 1_000)), { instanceOf: PierError });
  t.is(again!.code, 'UNAVAILABLE', 'a second take gets nothing: the offer is gone once taken');
  await bus.close();
});

test('hostile: a taker never asks what is not an offer of the other role (its ask goes out with its own rights)', async (t) => {
  const bus = new MemoryBus();
  let asked = 0;
  bus.subscribe('pier.>', () => asked++);
  for (const offer of ['pier.vault.op', streamSubject('provider', 'a'.repeat(24)), 'pier.stream.edge.not-hex']) {
    const err = await t.throwsAsync(drain(takeBytes(bus, 'provider', offer, 1_000)), { instanceOf: PierError });
    t.is(err!.code, 'BAD_GATEWAY', offer);
  }
  await new Promise((r) => setImmediate(r));
  t.is(asked, 0, 'nothing was published');
  await bus.close();
});

test('a taker that stops early stops the producer: the rest meets nobody and the offer finishes', async (t) => {
  const bus = new MemoryBus();
  let made = 0;
  async function* endless() {
    for (;;) {
      made++;
      yield Buffer.alloc(CHUNK_BYTES);
    }
  }
  const offer = offerBytes(bus, 'provider', 'edge', endless(), 2_000);
  for await (const _ of takeBytes(bus, 'edge', offer.subject, 5_000)) break;
  await within('the offer to finish once its taker is gone', offer.finished, 10_000);
  t.true(made < 20, `the producer stopped (${made} pieces made)`);
  await bus.close();
});

test('a piece whose headers are not a piece\'s is taken as a discard with seq -1, and its receiver decides', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 5_000);
  const got: Piece[] = [];
  receiveBytes(bus, stream, 'x.odd', async (p) => (got.push(p), {}));
  await bus.request('x.odd', new Uint8Array([1]), { timeoutMs: patience(10_000), headers: { 'pier-kind': 'explode', 'pier-seq': 'x' } });
  t.like(got[0], { seq: -1, kind: 'discard' });
  await bus.close();
});

test('hostile: a sender that does not keep to its window has the pieces past the bound refused at once, none kept', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 5_000);
  let handled = 0;
  const held: Array<() => void> = [];
  receiveBytes(bus, stream, 'x.flood', () => {
    handled++;
    return new Promise((resolve) => held.push(() => resolve({})));
  });
  // 100 pieces at once, none waiting for its answer (what a thief with a role's credentials could send).
  const outcomes = Array.from({ length: 100 }, (_, seq) => sendPiece(bus, at(stream, 'x.flood'), { seq, kind: 'data', data: Buffer.alloc(1024) }));
  const refused = await within('the refusals past the bound', Promise.all(outcomes.slice(MAX_WAITING_PIECES)), 5_000);
  t.true(refused.every((o) => !o.ok && o.error.code === 'RATE_LIMITED'));
  t.is(handled, 1, 'one piece handled at a time; the others wait, bounded');
  let answered = 0;
  for (const o of outcomes.slice(0, MAX_WAITING_PIECES)) void o.then(() => answered++);
  const deadline = Date.now() + 5_000; // what it waits for: every piece within the bound answered
  while (answered < MAX_WAITING_PIECES && Date.now() < deadline) {
    held.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  const kept = await within('the pieces within the bound', Promise.all(outcomes.slice(0, MAX_WAITING_PIECES)), 5_000);
  t.true(kept.every((o) => o.ok), 'every piece within the bound was answered');
  t.is(handled, MAX_WAITING_PIECES);
  await bus.close();
});

test('a piece answered later: the next ones are taken at once, each answer waits for its own, and they still count against the bound', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 5_000);
  const taken: number[] = [];
  const later: Array<() => void> = [];
  receiveBytes(bus, stream, 'x.later', async (piece) => {
    taken.push(piece.seq);
    return new AnswerLater(new Promise<Record<string, never>>((resolve) => later.push(() => resolve({}))));
  });
  const outcomes = Array.from({ length: MAX_WAITING_PIECES + 2 }, (_, seq) => sendPiece(bus, at(stream, 'x.later'), { seq, kind: 'data', data: Buffer.alloc(8) }));
  await until('every piece within the bound taken, none answered', () => taken.length >= MAX_WAITING_PIECES);
  const refused = await within('the two past the bound', Promise.all(outcomes.slice(MAX_WAITING_PIECES)), 5_000);
  t.true(refused.every((o) => !o.ok && o.error.code === 'RATE_LIMITED'), 'unanswered later pieces count against the bound');
  t.deepEqual(taken, Array.from({ length: MAX_WAITING_PIECES }, (_, i) => i), 'taken in order, without waiting for answers');
  let answered = 0;
  for (const o of outcomes.slice(0, MAX_WAITING_PIECES)) void o.then(() => answered++);
  later[3]!();
  await until('the fourth piece answered', () => answered === 1);
  for (const answer of later) answer();
  const kept = await within('every answer', Promise.all(outcomes.slice(0, MAX_WAITING_PIECES)), 5_000);
  t.true(kept.every((o) => o.ok));
  await bus.close();
});

test('`used` gets each source chunk back once all its pieces were answered ok, in order; a refused or unanswered one never', async (t) => {
  const bus = new MemoryBus();
  const stream = pieces<Record<string, never>>({}, 5_000);
  const answers = new Map<number, (ok: boolean) => void>();
  receiveBytes(bus, stream, 'x.used', async (piece) => {
    if (piece.kind !== 'data') return {};
    return new AnswerLater(new Promise<Record<string, never>>((resolve, reject) => answers.set(piece.seq, (ok) => (ok ? resolve({}) : reject(new PierError('INTERNAL', 'disk'))))));
  });
  // Three chunks: one of two pieces (seq 0, 1), one of one piece (2), one of two (3, 4).
  const chunks = [Buffer.alloc(CHUNK_BYTES + 1, 1), Buffer.alloc(10, 2), Buffer.alloc(2 * CHUNK_BYTES, 3)];
  const used: Uint8Array[] = [];
  async function* source() {
    yield* chunks;
  }
  const pushed = pushBytes(bus, at(stream, 'x.used'), source(), { window: 8, timeoutMs: 5_000, used: (c) => used.push(c) });
  pushed.catch(() => undefined);
  await until('five pieces taken', () => answers.size === 5);
  answers.get(1)!(true);
  await new Promise((r) => setTimeout(r, 50));
  t.deepEqual(used, [], 'the first chunk\'s second piece answered, its first not yet: not back');
  answers.get(0)!(true);
  await until('the first chunk back', () => used.length === 1);
  t.is(used[0], chunks[0], 'the chunk itself');
  answers.get(3)!(true);
  answers.get(2)!(false);
  answers.get(4)!(true);
  const failed = await within('the push to fail on the refused piece', pushed.then(() => null, (e: unknown) => e), 5_000);
  t.true(failed instanceof PierError);
  t.deepEqual(used, [chunks[0]], 'the refused chunk, and the one after it, never come back');
  await bus.close();
});

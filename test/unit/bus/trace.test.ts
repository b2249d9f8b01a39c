import test from 'ava';
import { activeTracer, boundTracestate, currentTrace, inSpan, parseTraceparent, runInTrace, traceHeaders } from '../../../bus/trace.js';

// W3C trace context as every layer takes it (bus/trace.ts): what is valid, what a hostile sender
// can make it carry, and what the pass-through tracer (export off) does: nothing but hand it on.
const ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';

test('a valid traceparent is read; a later version\'s extra fields are ignored', (t) => {
  t.deepEqual(parseTraceparent(`00-${ID}-${SPAN}-01`), { traceId: ID, spanId: SPAN, flags: 1 });
  t.deepEqual(parseTraceparent(`01-${ID}-${SPAN}-00-more`), { traceId: ID, spanId: SPAN, flags: 0 });
});

test('hostile: malformed, all-zero, version ff, upper case, version 00 with more, and huge traceparents are refused', (t) => {
  for (const bad of [undefined, '', 'x', `00-${'0'.repeat(32)}-${SPAN}-01`, `00-${ID}-${'0'.repeat(16)}-01`, `ff-${ID}-${SPAN}-01`, `00-${ID.toUpperCase()}-${SPAN}-01`, `00-${ID}-${SPAN}-01-x`, `01-${ID}-${SPAN}-01-${'x'.repeat(300)}`, `00-${ID}-${SPAN}-1`, `01-${ID}-${SPAN}-01-a b`, `01-${ID}-${SPAN}-01-a\r\nx-evil: 1`]) {
    t.is(parseTraceparent(bad), null, String(bad).slice(0, 80));
  }
});

test('hostile: tracestate keeps valid members only, at most 32 and 512 characters, dropping from the end', (t) => {
  t.is(boundTracestate('vendor=a1, other=b2'), 'vendor=a1,other=b2');
  t.is(boundTracestate('BAD KEY=1,ok=2,=3,k=,k2=v\u0000'), 'ok=2');
  t.is(boundTracestate(''), undefined);
  t.is(boundTracestate('nonsense'), undefined);
  const many = Array.from({ length: 100 }, (_, i) => `k${i}=v`).join(',');
  t.is(boundTracestate(many)!.split(',').length, 32);
  const long = Array.from({ length: 30 }, (_, i) => `k${i}=${'v'.repeat(40)}`).join(',');
  const cut = boundTracestate(long)!;
  t.true(cut.length <= 512);
  t.true(cut.startsWith('k0=') && !cut.includes('k29='));
  t.is(boundTracestate('x'.repeat(1_000_000)), undefined, 'a huge value is looked at only so far');
});

test('export off: an incoming trace is handed on unchanged and nothing else is made', async (t) => {
  const tracer = activeTracer();
  t.false(tracer.exporting);
  t.is(tracer.incoming('x', 'server', undefined, 'trusted'), null, 'no trace made up');
  t.is(tracer.incoming('x', 'server', { traceparent: 'garbage' }, 'trusted'), null);
  const span = tracer.incoming('x', 'server', { traceparent: `00-${ID}-${SPAN}-01`, tracestate: 'a=1' }, 'hint');
  t.deepEqual(span?.context, { traceparent: `00-${ID}-${SPAN}-01`, tracestate: 'a=1' });
  t.is(tracer.child('y', 'client'), null);
  await inSpan(span, async () => {
    await new Promise((r) => setTimeout(r, 1));
    t.deepEqual(traceHeaders(currentTrace()), { traceparent: `00-${ID}-${SPAN}-01`, tracestate: 'a=1' }, 'the same headers go out, after awaits and timers');
  });
  t.is(currentTrace(), undefined);
  t.is(runInTrace(undefined, () => currentTrace()), undefined);
});

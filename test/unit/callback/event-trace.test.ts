import test from 'ava';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { carriedTrace } from '../../../actors/callback/index.js';

// An event's own trace field becomes the app's traceparent header (docs/protocol.md "Callbacks to
// the app"): only a valid traceparent does; a forged event's anything else is not passed on.
const ev = (trace?: string): GatewayEvent => ({ eventId: 'c:1', connId: 'c', edge: 'e', user: 'u', app: 'a', seq: 1, oldest: 1, action: 'message', data: {}, cookie: null, ...(trace === undefined ? {} : { trace }) });

test('a valid trace is carried; none, a malformed one or one smuggling a header is not', (t) => {
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  t.deepEqual(carriedTrace(ev(tp)), { traceparent: tp });
  for (const bad of [undefined, '', 'x', `${tp}\r\nx-evil: 1`, '00-00000000000000000000000000000000-b7ad6b7169203331-01', `01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-a\r\nb`]) {
    t.is(carriedTrace(ev(bad)), undefined, JSON.stringify(bad));
  }
});

import test from 'ava';
import { PassThrough } from 'node:stream';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { reasonOf, Refusals, type RefusalReason } from '../../../actors/callback/refusals.js';
import { createLogger } from '../../../lib/runtime/log.js';

const ev = (connId: string): GatewayEvent => ({ eventId: `${connId}:1`, connId, edge: 'e00000000001', user: 'alice', app: 'ghost', seq: 1, oldest: 1, action: 'message', data: { secret: 'frame-data' }, cookie: 'auth_token=tok' });

test('every refusal is counted; one warn line per connection and reason, without data or cookie', (t) => {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d) => (text += d));
  const counted: RefusalReason[] = [];
  const r = new Refusals((reason) => counted.push(reason), createLogger({ level: 'info', name: 'test', destination: out }));
  for (let i = 0; i < 5; i++) r.refused('unknown_app', ev('e00000000001.A'), 'not installed');
  r.refused('address_policy', ev('e00000000001.A'), 'forbidden');
  r.refused('unknown_app', ev('e00000000001.B'), 'not installed');
  t.deepEqual(counted, ['unknown_app', 'unknown_app', 'unknown_app', 'unknown_app', 'unknown_app', 'address_policy', 'unknown_app']);
  const lines = text.trim().split('\n').map((l) => JSON.parse(l) as { level: number; reason: string; connId: string; msg: string });
  t.deepEqual(lines.map((l) => [l.reason, l.connId]), [['unknown_app', 'e00000000001.A'], ['address_policy', 'e00000000001.A'], ['unknown_app', 'e00000000001.B']]);
  t.true(lines.every((l) => l.level === 40 && l.msg === 'gateway callback refused'), 'at warn');
  t.false(/frame-data|auth_token/.test(text), 'neither the data nor the cookie is logged');
});

test('the reason follows the refusal code', (t) => {
  t.is(reasonOf('NOT_FOUND'), 'unknown_app');
  t.is(reasonOf('BAD_REQUEST'), 'mismatched_app');
  t.is(reasonOf('UNAVAILABLE'), 'registry_unavailable');
});

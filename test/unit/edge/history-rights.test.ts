import test from 'ava';
import type { Bus } from '../../../bus/bus.js';
import { PierError } from '../../../bus/errors.js';
import { keepsHistory } from '../../../edge/gateway/history-off.js';
import type { RoleContext } from '../../../lib/runtime/runtime.js';

// An edge of this release started with the identity of an earlier `pier bus init` may not use
// pier.history.* (nats-server refuses the publish): it runs on without history, and says so once,
// naming `pier bus init`, in a line the chaos run's check counts ("gateway history: off").

function edgeWith(answer: () => Promise<never>) {
  const warned: string[] = [];
  const asked: string[] = [];
  const bus = {
    kind: 'nats',
    request: async (subject: string) => {
      asked.push(subject);
      return answer();
    },
  } as unknown as Bus;
  const ctx = {
    bus,
    config: { natsUrl: 'nats://127.0.0.1:4222', state: { kind: 'jetstream', replicas: 1 }, gateway: { history: { on: true, keys: [Buffer.alloc(32)] } } },
    log: { warn: (_o: unknown, line: string) => warned.push(line) },
    jetstream: {},
  } as unknown as RoleContext;
  return { ctx, warned, asked };
}

test('an identity without pier.history.*: no history, one warning naming pier bus init', async (t) => {
  const e = edgeWith(() => Promise.reject(new PierError('FORBIDDEN', 'bus: this identity may not publish to pier.history.head')));
  t.false(await keepsHistory(e.ctx));
  t.deepEqual(e.asked, ['pier.history.head']);
  t.is(e.warned.length, 1);
  t.regex(e.warned[0]!, /^gateway history: off on this edge: .*pier\.history\.\*.*`pier bus init`/);
});

test('an identity with the right keeps history, whether a history actor answers yet or not', async (t) => {
  for (const err of [new PierError('UNAVAILABLE', 'no responders for pier.history.head'), new PierError('TIMEOUT', 'timed out')]) {
    const e = edgeWith(() => Promise.reject(err));
    t.true(await keepsHistory(e.ctx), err.code);
    t.deepEqual(e.warned, []);
  }
});

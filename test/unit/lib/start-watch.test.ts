import test from 'ava';
import { sayWaiting, StartWatch } from '../../../lib/runtime/start-watch.js';
import { until } from '../../helpers/wait.js';

// A process waiting at start says what for, again and again until it is ready (lib/runtime/start-watch.ts).
test('reports name the step and the last reason a retry gave; a new step forgets the old reason; done stops them', async (t) => {
  const lines: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const watch = new StartWatch({ warn: (fields, msg) => lines.push({ fields, msg }) }, 20);
  t.teardown(() => watch.done());
  watch.at('the vault role to open its state');
  sayWaiting('JetStream: 503');
  await until('two reports', () => lines.length >= 2);
  t.regex(lines[0]!.msg, /^starting: still waiting for the vault role to open its state \(JetStream: 503\) after \d+ s$/);
  t.like(lines[0]!.fields, { step: 'the vault role to open its state', reason: 'JetStream: 503' });
  watch.at('the edge to open its history and listeners');
  const at = lines.length;
  await until('a report of the new step', () => lines.length > at + 1);
  t.is(lines[lines.length - 1]!.msg.replace(/\d+ s$/, 'N s'), 'starting: still waiting for the edge to open its history and listeners after N s');
  watch.done();
  const stopped = lines.length;
  sayWaiting('heard by nobody'); // no listener after done: no throw
  await new Promise((r) => setTimeout(r, 100));
  t.is(lines.length, stopped, 'no report after done');
});

test('hostile: a reason thousands of characters long is cut to 200 in the report', async (t) => {
  const lines: string[] = [];
  const watch = new StartWatch({ warn: (_f, msg) => lines.push(msg) }, 20);
  t.teardown(() => watch.done());
  sayWaiting('x'.repeat(10_000));
  await until('a report', () => lines.length > 0);
  t.true(lines[0]!.length < 300, `${lines[0]!.length} characters`);
});

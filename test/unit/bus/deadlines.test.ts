import test from 'ava';
import { Deadlines } from '../../../bus/deadlines.js';
import { until } from '../../helpers/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a wait fires only once its clock says its time has come, and those of a duration in the order they began', async (t) => {
  let clock = 1_000;
  const deadlines = new Deadlines(() => clock);
  const fired: string[] = [];
  deadlines.after(20, () => fired.push('a'));
  clock += 5;
  deadlines.after(20, () => fired.push('b'));
  deadlines.after(10, () => fired.push('short'));
  await sleep(60);
  t.deepEqual(fired, [], 'the timers rang, the clock had not moved: set again, nothing fired');
  clock += 10;
  await until('the short wait', () => fired.length === 1, 5_000);
  t.deepEqual(fired, ['short']);
  clock += 100;
  await until('the others', () => fired.length === 3, 5_000);
  t.deepEqual(fired, ['short', 'a', 'b']);
  t.is(deadlines.size, 0);
  t.is(deadlines.timers, 0, 'no timer left');
});

test('a cancelled wait never fires, and a duration with no wait left holds no timer (nothing keeps the process alive)', async (t) => {
  let clock = 0;
  const deadlines = new Deadlines(() => clock);
  let fired = 0;
  const waits = Array.from({ length: 1_000 }, () => deadlines.after(5, () => fired++));
  t.is(deadlines.timers, 1, 'one timer for the duration, not one per wait');
  for (const w of waits.slice(0, 999)) w.cancel();
  t.is(deadlines.size, 1);
  waits[999].cancel();
  waits[999].cancel();
  t.is(deadlines.size, 0);
  t.is(deadlines.timers, 0, 'the last cancel took the timer');
  const first = deadlines.after(5, () => fired++);
  deadlines.after(5, () => fired++);
  first.cancel();
  clock += 10;
  await until('the one left', () => fired === 1, 5_000);
  await sleep(20);
  t.is(fired, 1, 'the cancelled one never');
  t.is(deadlines.timers, 0);
});

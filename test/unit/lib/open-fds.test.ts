import test from 'ava';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { replaceOpenFdsGauge } from '../../../lib/runtime/open-fds.js';

// process_open_fds keeps prom-client's name and meaning, but is counted off the event loop and at
// most once per refresh (lib/runtime/open-fds.ts): an edge holding many connections listed them all
// on its event loop at every collection.
const openFds = async (registry: Registry) => (await registry.getMetricsAsJSON()).filter((m) => m.name === 'process_open_fds');

test('the series is kept, once, with a real count', async (t) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  replaceOpenFdsGauge(registry);
  const series = await openFds(registry);
  t.is(series.length, 1);
  t.true((series[0].values[0]?.value ?? 0) > 0, JSON.stringify(series));
});

test('hostile: collections in quick succession read the folder once per refresh, and concurrent ones share the read', async (t) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let reads = 0;
  let clock = 1_000_000;
  replaceOpenFdsGauge(registry, { refreshMs: 30_000, now: () => clock, count: async () => ++reads * 10 });
  const values = await Promise.all(Array.from({ length: 20 }, () => openFds(registry)));
  t.is(reads, 1, 'twenty collections at once share one read');
  t.true(values.every((v) => v[0].values[0].value === 10));
  clock += 29_999;
  t.is((await openFds(registry))[0].values[0].value, 10, 'within the refresh: the last count');
  t.is(reads, 1);
  clock += 1;
  t.is((await openFds(registry))[0].values[0].value, 20, 'past it: counted again');
  t.is(reads, 2);
});

test('a count that fails keeps the last value and is tried again at the next refresh', async (t) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let clock = 0;
  let fail = false;
  replaceOpenFdsGauge(registry, { refreshMs: 10, now: () => clock, count: async () => { if (fail) throw new Error('EMFILE'); return 7; } });
  t.is((await openFds(registry))[0].values[0].value, 7);
  fail = true;
  clock += 10;
  t.is((await openFds(registry))[0].values[0].value, 7);
});

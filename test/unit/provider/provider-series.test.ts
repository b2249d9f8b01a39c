import test from 'ava';
import { Counter, Histogram, Registry } from 'prom-client';
import { ProviderSeries } from '../../../actors/provider/metrics.js';
import { Tallies } from '../../../lib/runtime/metric-tally.js';

// The provider actor's per-call series, tallied (actors/provider/metrics.ts): a scrape reads what
// prom-client alone, counting each call with its labels, would show.

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30];
const CALLS: Array<[string, number, number]> = [
  ['notes', 200, 0.0004],
  ['notes', 200, 0.003],
  ['notes', 502, 0.2],
  ['files', 200, 0.0011],
  ['notes', 504, 31],
  ['files', 404, 0],
  ['notes', 200, 0.0004],
];

/** Each `_sum` to 12 significant digits: a tally adds its values before prom-client's sum does. */
const rounded = (scrape: string) => scrape.replace(/^(\S+_sum\S*) (\S+)$/gm, (_l, name: string, v: string) => `${name} ${Number(Number(v).toPrecision(12))}`);

function metrics(registry: Registry, collect?: () => void) {
  const registers = [registry];
  return {
    calls: new Counter({ name: 'pier_provider_calls_total', help: 'c', labelNames: ['provider', 'status'], registers, ...(collect ? { collect } : {}) }),
    latency: new Histogram({ name: 'pier_provider_upstream_seconds', help: 'h', labelNames: ['provider'], buckets: BUCKETS, registers, ...(collect ? { collect } : {}) }),
  };
}

test('calls by provider and status, and time to the answer by provider, scrape as prom-client counting each call would', async (t) => {
  const plain = new Registry();
  const p = metrics(plain);
  const tallied = new Registry();
  const tallies = new Tallies();
  const m = metrics(tallied, tallies.collect);
  const series = new ProviderSeries(tallies, m.calls, m.latency, BUCKETS);
  for (const [name, status, seconds] of CALLS) {
    p.calls.inc({ provider: name, status: String(status) });
    p.latency.observe({ provider: name }, seconds);
    series.observe(name, status, seconds);
  }
  t.is(rounded(await tallied.metrics()), rounded(await plain.metrics()));
  t.regex(await tallied.metrics(), /pier_provider_calls_total\{provider="notes",status="200"\} 3/);
  // Counted on after a scrape: the running totals go on from there.
  series.observe('notes', 200, 0.002);
  p.calls.inc({ provider: 'notes', status: '200' });
  p.latency.observe({ provider: 'notes' }, 0.002);
  t.is(rounded(await tallied.metrics()), rounded(await plain.metrics()));
});

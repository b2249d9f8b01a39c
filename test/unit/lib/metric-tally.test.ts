import test from 'ava';
import { Counter, Histogram, Registry } from 'prom-client';
import { Tallies } from '../../../lib/runtime/metric-tally.js';
import { Metrics } from '../../../lib/runtime/metrics.js';

// Hot-path series tallied in plain numbers and folded into prom-client at each scrape
// (lib/runtime/metric-tally.ts): what a scrape reads is exactly what prom-client alone would show.

const BUCKETS = [0.001, 0.01, 0.1, 1];

/**
 * A scrape with each `_sum` rounded to 12 significant digits: a tally adds its values up before
 * they reach prom-client's sum, and floating-point addition in another order may differ in the last bit.
 */
const rounded = (scrape: string) => scrape.replace(/^(\S+_sum\S*) (\S+)$/gm, (_l, name: string, v: string) => `${name} ${Number(Number(v).toPrecision(12))}`);
const VALUES = [0.0005, 0.001, 0.002, 0.05, 0.5, 1, 3, 0.0001, 0.2];

/** The same events through prom-client's own series and through tallies, scraped from two registries. */
async function scrapes(observe: (hist: { observe(v: number): void }, count: { inc(): void }) => void | Promise<void>): Promise<[string, string]> {
  const plain = new Registry();
  const hPlain = new Histogram({ name: 'h', help: 'h', labelNames: ['a'], buckets: BUCKETS, registers: [plain] });
  const cPlain = new Counter({ name: 'c', help: 'c', labelNames: ['a', 'b'], registers: [plain] });
  const tallied = new Registry();
  const tallies = new Tallies();
  const hTallied = new Histogram({ name: 'h', help: 'h', labelNames: ['a'], buckets: BUCKETS, registers: [tallied], collect: tallies.collect });
  const cTallied = new Counter({ name: 'c', help: 'c', labelNames: ['a', 'b'], registers: [tallied], collect: tallies.collect });
  await observe(hPlain.labels('x'), cPlain.labels('x', 'y'));
  await observe(tallies.histogram(hTallied, { a: 'x' }, BUCKETS), tallies.counter(cTallied, { a: 'x', b: 'y' }));
  return [await plain.metrics(), await tallied.metrics()];
}

test('a tallied histogram and counter scrape as prom-client\'s own series, the top bucket and beyond included', async (t) => {
  const [plain, tallied] = await scrapes((h, c) => {
    for (const v of VALUES) {
      h.observe(v);
      c.inc();
    }
  });
  t.is(rounded(tallied), rounded(plain));
  t.regex(tallied, /h_count\{a="x"\} 9/);
  t.regex(tallied, /c\{a="x",b="y"\} 9/);
});

test('tallies folded at one scrape and counted on after it add up, as prom-client\'s running totals do', async (t) => {
  const plain = new Registry();
  const tallied = new Registry();
  const tallies = new Tallies();
  const hPlain = new Histogram({ name: 'h', help: 'h', labelNames: ['a'], buckets: BUCKETS, registers: [plain] });
  const hTallied = new Histogram({ name: 'h', help: 'h', labelNames: ['a'], buckets: BUCKETS, registers: [tallied], collect: tallies.collect });
  const series = tallies.histogram(hTallied, { a: 'x' }, BUCKETS);
  // Two tallies of one series (the edge makes one per method and status) fold into the same record.
  const again = tallies.histogram(hTallied, { a: 'x' }, BUCKETS);
  for (const v of VALUES) {
    hPlain.observe({ a: 'x' }, v);
    series.observe(v);
  }
  t.is(rounded(await tallied.metrics()), rounded(await plain.metrics()));
  for (const v of VALUES) {
    hPlain.observe({ a: 'x' }, v);
    again.observe(v);
  }
  t.is(rounded(await tallied.metrics()), rounded(await plain.metrics()));
  // A reset (prom-client's own) starts the series again from what is tallied after it.
  hPlain.reset();
  hTallied.reset();
  hPlain.observe({ a: 'x' }, 0.3);
  series.observe(0.3);
  t.is(rounded(await tallied.metrics()), rounded(await plain.metrics()));
});

test('a value prom-client refuses is refused by a tally as it comes', (t) => {
  const tallies = new Tallies();
  const h = new Histogram({ name: 'h', help: 'h', labelNames: ['a'], buckets: BUCKETS, registers: [], collect: tallies.collect });
  t.throws(() => tallies.histogram(h, { a: 'x' }, BUCKETS).observe(Number.NaN), { instanceOf: TypeError });
});

test('the Metrics of a process answer the edge and actor series through tallies, seen at the next scrape', async (t) => {
  const m = new Metrics('test');
  m.httpCount('system', 'POST /x', '200').inc();
  m.httpTime('system', 'POST /x').observe(0.002);
  m.observeActor('pier.vault.op', 0.0007, undefined);
  const text = await m.registry.metrics();
  t.regex(text, /pier_http_requests_total\{listener="system",route="POST \/x",status="200",instance="test"\} 1/);
  t.regex(text, /pier_http_request_seconds_bucket\{le="0.0025",instance="test",listener="system",route="POST \/x"\} 1/);
  t.regex(text, /pier_actor_requests_total\{endpoint="pier.vault.op",instance="test"\} 1/);
  t.regex(text, /pier_actor_processing_seconds_count\{instance="test",endpoint="pier.vault.op"\} 1/);
});

test('where prom-client keeps its series in another shape, each observation goes to it as it comes', (t) => {
  const seen: number[] = [];
  const other = { zero: () => undefined, observe: (_labels: unknown, v: number) => seen.push(v) } as unknown as Histogram<'a'>;
  new Tallies().histogram(other, { a: 'x' }, BUCKETS).observe(0.5);
  t.deepEqual(seen, [0.5]);
});

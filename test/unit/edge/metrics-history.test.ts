import test from 'ava';
import { MetricsHistory, type MetricJson } from '../../../edge/admin/metrics-history.js';

const counter = (name: string, value: number, labels: Record<string, string> = {}): MetricJson => ({ name, type: 'counter', values: [{ value, labels }] });
const histogram = (counts: Record<string, number>): MetricJson => ({
  name: 'pier_http_request_seconds',
  type: 'histogram',
  values: Object.entries(counts).map(([le, value]) => ({ value, labels: { le }, metricName: 'pier_http_request_seconds_bucket' })),
});

test('rates between samples, summed over processes; p99 from the interval\'s buckets; gauges as they are', (t) => {
  const h = new MetricsHistory();
  h.add(0, [[counter('pier_http_requests_total', 100), histogram({ '0.001': 50, '0.01': 100, '+Inf': 100 })], [counter('pier_ws_messages_in_total', 10)]]);
  t.deepEqual(h.all(), [], 'the first sample is the baseline');
  h.add(10_000, [
    [counter('pier_http_requests_total', 300), histogram({ '0.001': 50, '0.01': 290, '0.1': 0, '+Inf': 300 }), { name: 'pier_ws_connections', type: 'gauge', values: [{ value: 7, labels: {} }] }],
    [counter('pier_ws_messages_in_total', 30), counter('pier_ws_messages_out_total', 20)],
  ]);
  const [s] = h.all();
  t.is(s!.http_requests_per_s, 20);
  t.is(s!.ws_messages_per_s, 4, '(30 - 10 + 20) / 10 s');
  t.is(s!.ws_connections, 7);
  t.is(s!.http_p99_ms, null, '99 % of the 200 new requests are not under any finite bound here');
});

test('a restarted process (counters going back) counts as nothing, never negative; the history is bounded', (t) => {
  const h = new MetricsHistory(3);
  h.add(0, [[counter('pier_bus_refusals_total', 50)]]);
  h.add(1_000, [[counter('pier_bus_refusals_total', 5)]]);
  t.is(h.all()[0]!.bus_refusals_per_s, 0);
  for (let i = 2; i < 10; i++) h.add(i * 1_000, [[counter('pier_bus_refusals_total', 5 + i)]]);
  t.is(h.all().length, 3);
  t.is(h.all()[2]!.bus_refusals_per_s, 1);
});

test('p99: the smallest bound holding 99 % of the interval\'s requests, in ms', (t) => {
  const h = new MetricsHistory();
  h.add(0, [[histogram({ '0.005': 0, '0.05': 0, '+Inf': 0 })]]);
  h.add(1_000, [[histogram({ '0.005': 990, '0.05': 1000, '+Inf': 1000 })]]);
  t.is(h.all()[0]!.http_p99_ms, 5);
});

test('requests per route: the interval\'s rate of each route, the busiest kept, idle ones left out', (t) => {
  const h = new MetricsHistory();
  const routes = (a: number, b: number, c: number): MetricJson => ({
    name: 'pier_http_requests_total',
    type: 'counter',
    values: [
      { value: a, labels: { listener: 'system', route: 'POST /permission/v1alpha1/access', status: '200' } },
      { value: b, labels: { listener: 'system', route: 'POST /permission/v1alpha1/access', status: '401' } },
      { value: c, labels: { listener: 'admin', route: 'GET /admin/v1/status', status: '200' } },
    ],
  });
  h.add(0, [[routes(10, 0, 5)]]);
  h.add(2_000, [[routes(30, 4, 5)]]);
  t.deepEqual(h.all()[0]!.routes, { 'system POST /permission/v1alpha1/access': 12 });
  t.is(h.all()[0]!.http_requests_per_s, 12);
});

test("the admin listener's own requests (the console polling) are in neither the rate nor the busiest routes", (t) => {
  const h = new MetricsHistory();
  const counts = (app: number, admin: number): MetricJson[] => [
    {
      name: 'pier_http_requests_total',
      type: 'counter',
      values: [
        { value: app, labels: { listener: 'system', route: 'POST /permission/v1alpha1/access', status: '200' } },
        { value: admin, labels: { listener: 'admin', route: 'GET /admin/v1/status', status: '200' } },
      ],
    },
    {
      name: 'pier_http_request_seconds',
      type: 'histogram',
      values: [
        { value: app, labels: { listener: 'system', route: 'POST /permission/v1alpha1/access', le: 0.005 }, metricName: 'pier_http_request_seconds_bucket' },
        { value: app, labels: { listener: 'system', route: 'POST /permission/v1alpha1/access', le: '+Inf' }, metricName: 'pier_http_request_seconds_bucket' },
        { value: 0, labels: { listener: 'admin', route: 'GET /admin/v1/status', le: 0.005 }, metricName: 'pier_http_request_seconds_bucket' },
        { value: admin, labels: { listener: 'admin', route: 'GET /admin/v1/status', le: '+Inf' }, metricName: 'pier_http_request_seconds_bucket' },
      ],
    },
  ];
  h.add(0, [counts(0, 0)]);
  h.add(1_000, [counts(2, 500)]);
  const [sample] = h.all();
  t.deepEqual(sample!.routes, { 'system POST /permission/v1alpha1/access': 2 });
  t.is(sample!.http_requests_per_s, 2);
  t.is(sample!.http_p99_ms, 5, "the admin listener's slow answers are not the p99 either");
});

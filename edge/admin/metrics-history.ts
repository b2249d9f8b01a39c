/**
 * A short history of the cluster's figures for the console's charts (docs/operations.md "Console"): the
 * admin process samples what every process reports on the bus (the same figures as `/metrics`)
 * and keeps the last `max` samples as rates. Bounded in memory whatever the cluster does.
 */

/** One process's metrics as prom-client's `getMetricsAsJSON` gives them. */
export interface MetricJson {
  name: string;
  type: string;
  values: Array<{ value: number; labels: Record<string, string | number>; metricName?: string }>;
}

export interface HistorySample {
  /** ms since the epoch */
  at: number;
  http_requests_per_s: number;
  /** p99 of HTTP handling over the interval, from the histogram buckets (their upper bound), ms; null when nothing was served. */
  http_p99_ms: number | null;
  provider_calls_per_s: number;
  vault_ops_per_s: number;
  ws_messages_per_s: number;
  callback_retries_per_s: number;
  bus_refusals_per_s: number;
  ws_connections: number;
  uploads_active: number;
  /** Requests per second by route (`<listener> <METHOD path>`), the busiest ROUTES_KEPT of the interval. */
  routes: Record<string, number>;
}

/** Routes kept per sample: the busiest; the rest are in /metrics. */
const ROUTES_KEPT = 12;

interface Totals {
  at: number;
  counters: Record<string, number>;
  gauges: Record<string, number>;
  /** Cumulative counts of pier_http_request_seconds by bucket bound, summed over every series. */
  buckets: Map<number, number>;
  /** pier_http_requests_total by route, summed over statuses and processes. */
  routes: Map<string, number>;
}

const COUNTERS = {
  http_requests_per_s: ['pier_http_requests_total'],
  provider_calls_per_s: ['pier_provider_calls_total'],
  vault_ops_per_s: ['pier_vault_operations_total'],
  ws_messages_per_s: ['pier_ws_messages_in_total', 'pier_ws_messages_out_total'],
  callback_retries_per_s: ['pier_callbacks_retried_total'],
  bus_refusals_per_s: ['pier_bus_refusals_total'],
} as const;
const GAUGES = { ws_connections: 'pier_ws_connections', uploads_active: 'pier_uploads_active' } as const;

/**
 * The admin listener's own requests (the operator's, the console's polls) are left out of the HTTP
 * figures: they describe what Pier serves to apps and browsers, and on an idle system the console
 * watching would otherwise be the busiest thing on it. /metrics has them all.
 */
const OPERATOR_LISTENER = 'admin';

function totalsOf(at: number, processes: MetricJson[][]): Totals {
  const sums = new Map<string, number>();
  const buckets = new Map<number, number>();
  const routes = new Map<string, number>();
  for (const metrics of processes) {
    for (const m of metrics) {
      if (m.name === 'pier_http_requests_total') {
        for (const v of m.values) {
          if (v.labels.listener === OPERATOR_LISTENER) continue;
          sums.set(m.name, (sums.get(m.name) ?? 0) + (Number.isFinite(v.value) ? v.value : 0));
          const route = `${String(v.labels.listener ?? '')} ${String(v.labels.route ?? '')}`;
          if (routes.size < 1000 || routes.has(route)) routes.set(route, (routes.get(route) ?? 0) + v.value);
        }
        continue;
      }
      if (m.name === 'pier_http_request_seconds') {
        for (const v of m.values) {
          if (v.metricName !== 'pier_http_request_seconds_bucket' || v.labels.listener === OPERATOR_LISTENER) continue;
          const le = v.labels.le === '+Inf' ? Infinity : Number(v.labels.le);
          buckets.set(le, (buckets.get(le) ?? 0) + v.value);
        }
        continue;
      }
      let sum = 0;
      for (const v of m.values) sum += Number.isFinite(v.value) ? v.value : 0;
      sums.set(m.name, (sums.get(m.name) ?? 0) + sum);
    }
  }
  const counters: Record<string, number> = {};
  for (const [key, names] of Object.entries(COUNTERS)) counters[key] = names.reduce((n, name) => n + (sums.get(name) ?? 0), 0);
  const gauges: Record<string, number> = {};
  for (const [key, name] of Object.entries(GAUGES)) gauges[key] = sums.get(name) ?? 0;
  return { at, counters, gauges, buckets, routes };
}

/** The interval's p99 from two cumulative bucket sets (a restarted process's counters going back count as 0). */
function p99Between(before: Map<number, number>, after: Map<number, number>): number | null {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const delta = (le: number) => Math.max(0, (after.get(le) ?? 0) - (before.get(le) ?? 0));
  const total = delta(Infinity);
  if (total <= 0) return null;
  for (const le of bounds) if (delta(le) >= 0.99 * total) return Number.isFinite(le) ? le * 1000 : null;
  return null;
}

/** The interval's request rate of each route, the busiest ROUTES_KEPT of them. */
function busiest(before: Map<string, number>, after: Map<string, number>, seconds: number): Record<string, number> {
  const rates = [...after].map(([route, n]) => [route, Math.max(0, n - (before.get(route) ?? 0)) / seconds] as const).filter(([, r]) => r > 0);
  rates.sort((a, b) => b[1] - a[1]);
  return Object.fromEntries(rates.slice(0, ROUTES_KEPT).map(([route, r]) => [route, Math.round(r * 100) / 100]));
}

export class MetricsHistory {
  private readonly samples: HistorySample[] = [];
  private last: Totals | null = null;

  constructor(private readonly max = 180) {}

  /** Adds a sample from every process's metrics at `at`; the first one only sets the baseline. */
  add(at: number, processes: MetricJson[][]): void {
    const now = totalsOf(at, processes);
    const before = this.last;
    this.last = now;
    if (!before || now.at <= before.at) return;
    const seconds = (now.at - before.at) / 1000;
    const rate = (key: string) => Math.round((Math.max(0, now.counters[key]! - before.counters[key]!) / seconds) * 100) / 100;
    const sample: HistorySample = {
      at,
      http_requests_per_s: rate('http_requests_per_s'),
      http_p99_ms: p99Between(before.buckets, now.buckets),
      provider_calls_per_s: rate('provider_calls_per_s'),
      vault_ops_per_s: rate('vault_ops_per_s'),
      ws_messages_per_s: rate('ws_messages_per_s'),
      callback_retries_per_s: rate('callback_retries_per_s'),
      bus_refusals_per_s: rate('bus_refusals_per_s'),
      ws_connections: now.gauges.ws_connections!,
      uploads_active: now.gauges.uploads_active!,
      routes: busiest(before.routes, now.routes, seconds),
    };
    this.samples.push(sample);
    if (this.samples.length > this.max) this.samples.splice(0, this.samples.length - this.max);
  }

  all(): HistorySample[] {
    return [...this.samples];
  }
}

import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PierError } from '../../bus/errors.js';
import { Tallies } from './metric-tally.js';
import { replaceOpenFdsGauge } from './open-fds.js';

const ACTOR_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const HTTP_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/**
 * The process's Prometheus registry and the metrics every part shares. Each process labels its
 * series with `instance`, so the admin listener can merge several processes without collisions.
 */
export class Metrics {
  readonly registry = new Registry();

  /** Actor endpoints, after the NATS services framework: requests, errors, processing time, last error. */
  readonly actorRequests: Counter<'endpoint'>;
  readonly actorErrors: Counter<'endpoint' | 'code'>;
  readonly actorSeconds: Histogram<'endpoint'>;
  readonly actorLastError: Gauge<'endpoint' | 'code'>;

  readonly httpRequests: Counter<'listener' | 'route' | 'status'>;
  readonly httpSeconds: Histogram<'listener' | 'route'>;

  /** Handlers (HTTP, WebSocket, bus) that threw: each was logged and answered, the process went on. */
  readonly handlerFailures: Counter<'where'>;

  /**
   * Bus messages refused: `permission` (a role's own view refused a subject it did not declare, or
   * nats-server refused one), `schema` (a message failed its schema), `undecodable`.
   */
  readonly busRefusals: Counter<'reason' | 'subject'>;

  readonly registryRevision: Gauge;
  readonly registryResyncs: Counter;

  /** The hot series (every request's): counted in plain numbers, handed to prom-client at each scrape (metric-tally.ts). */
  private readonly actorTallies = new Tallies();
  private readonly httpTallies = new Tallies();

  constructor(instance: string) {
    this.registry.setDefaultLabels({ instance });
    // Process and event-loop metrics (nodejs_eventloop_lag_p99_seconds is reset at each scrape).
    collectDefaultMetrics({ register: this.registry });
    replaceOpenFdsGauge(this.registry);
    const registers = [this.registry];
    this.actorRequests = new Counter({ name: 'pier_actor_requests_total', help: 'Requests handled by actor endpoints', labelNames: ['endpoint'], registers, collect: this.actorTallies.collect });
    this.actorErrors = new Counter({ name: 'pier_actor_errors_total', help: 'Requests that ended in an error', labelNames: ['endpoint', 'code'], registers });
    this.actorSeconds = new Histogram({
      name: 'pier_actor_processing_seconds',
      help: 'Processing time of actor endpoints',
      labelNames: ['endpoint'],
      buckets: ACTOR_BUCKETS,
      registers,
      collect: this.actorTallies.collect,
    });
    this.actorLastError = new Gauge({ name: 'pier_actor_last_error_timestamp_seconds', help: 'When each endpoint last failed, by error code', labelNames: ['endpoint', 'code'], registers });
    this.httpRequests = new Counter({ name: 'pier_http_requests_total', help: 'HTTP requests answered by the edge', labelNames: ['listener', 'route', 'status'], registers, collect: this.httpTallies.collect });
    this.httpSeconds = new Histogram({
      name: 'pier_http_request_seconds',
      help: 'Time to answer HTTP requests at the edge',
      labelNames: ['listener', 'route'],
      buckets: HTTP_BUCKETS,
      registers,
      collect: this.httpTallies.collect,
    });
    this.handlerFailures = new Counter({ name: 'pier_handler_failures_total', help: 'Handlers that threw (logged, answered 500 or closed 1011)', labelNames: ['where'], registers });
    this.busRefusals = new Counter({ name: 'pier_bus_refusals_total', help: 'Bus messages refused (permission, schema, undecodable)', labelNames: ['reason', 'subject'], registers });
    this.registryRevision = new Gauge({ name: 'pier_registry_cache_revision', help: 'Registry revision held by this process cache', registers });
    this.registryResyncs = new Counter({ name: 'pier_registry_cache_resyncs_total', help: 'Full snapshot reloads of the registry cache', registers });
  }

  /** One HTTP route's count of answers with `status`: the edge looks each up once (a few methods times the statuses Pier answers). */
  httpCount(listener: string, route: string, status: string): { inc(): void } {
    return this.httpTallies.counter(this.httpRequests, { listener, route, status });
  }

  /** One HTTP route's time to answer, looked up once per route and method. */
  httpTime(listener: string, route: string): { observe(seconds: number): void } {
    return this.httpTallies.histogram(this.httpSeconds, { listener, route }, HTTP_BUCKETS);
  }

  /** The hook `serve()` calls after each actor request. */
  /** Each endpoint's series, looked up once (its subjects are the process's own: bounded). */
  private readonly actorSeries = new Map<string, { requests: { inc(): void }; seconds: { observe(v: number): void } }>();

  observeActor = (endpoint: string, seconds: number, error: PierError | undefined): void => {
    let series = this.actorSeries.get(endpoint);
    if (!series) this.actorSeries.set(endpoint, (series = { requests: this.actorTallies.counter(this.actorRequests, { endpoint }), seconds: this.actorTallies.histogram(this.actorSeconds, { endpoint }, ACTOR_BUCKETS) }));
    series.requests.inc();
    series.seconds.observe(seconds);
    if (error) {
      this.actorErrors.inc({ endpoint, code: error.code });
      this.actorLastError.set({ endpoint, code: error.code }, Date.now() / 1000);
    }
  };
}

import { Counter } from 'prom-client';
import { useTracer } from '../../bus/trace.js';
import type { Config } from '../config/config-types.js';
import type { Logger } from '../runtime/log.js';
import type { Metrics } from '../runtime/metrics.js';
import { pierVersion } from '../runtime/version.js';

/**
 * Starts span export when configured (docs/operations.md "Tracing") and installs its tracer for
 * the process; with export off, the bus's pass-through stays. Answers the stop: what is queued is
 * sent (bounded by the exporter's timeout), and the pass-through comes back. The OpenTelemetry SDK is
 * imported only by a process that exports (docs/operations.md "Start-up").
 */
export async function installTracing(config: Config, log: Logger, metrics: Metrics): Promise<() => Promise<void>> {
  if (!config.tracing.export) return async () => undefined;
  const { startOtel } = await import('./otel.js');
  const otel = startOtel({
    config: config.tracing,
    version: pierVersion(),
    instanceId: config.instanceId,
    roles: config.roles,
    onExportError: (message, failures) => log.warn({ failures, endpoint: config.tracing.export ? config.tracing.url : undefined }, `tracing: spans could not be exported (${message}); said at most once a minute`),
  });
  const registers = [metrics.registry];
  new Counter({ name: 'pier_trace_spans_dropped_total', help: 'Spans dropped because the export queue was full (PIER_TRACE_QUEUE_SPANS)', registers, collect() {
    this.reset();
    this.inc(otel.dropped());
  } });
  new Counter({ name: 'pier_trace_export_failures_total', help: 'Span exports that failed (the collector slow, refusing or gone)', registers, collect() {
    this.reset();
    this.inc(otel.failures());
  } });
  useTracer(otel.tracer);
  log.info({ endpoint: config.tracing.url, service: config.tracing.serviceName, sampler: config.tracing.sampler, ratio: config.tracing.ratio }, 'tracing: exporting spans (OTLP/HTTP)');
  return async () => {
    useTracer(null);
    await otel.shutdown();
  };
}

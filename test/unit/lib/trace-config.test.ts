import test from 'ava';
import { Writable } from 'node:stream';
import { runInTrace } from '../../../bus/trace.js';
import { ConfigError } from '../../../lib/config/config-error.js';
import { createLogger } from '../../../lib/runtime/log.js';
import { parseTracing } from '../../../lib/trace/config.js';

// Tracing's configuration (docs/operations.md "Tracing"): OpenTelemetry's standard variables, off
// without an endpoint, and every bad value a one-line error naming the variable.

test('off unless an endpoint is given, or when turned off by the standard variables', (t) => {
  t.deepEqual(parseTracing({}), { export: false });
  t.deepEqual(parseTracing({ OTEL_TRACES_SAMPLER: 'always_on' }), { export: false });
  t.deepEqual(parseTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), { export: false });
  t.deepEqual(parseTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), { export: false });
});

test('the endpoint, service name, sampler and bounds as given', (t) => {
  t.like(parseTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }), { export: true, url: 'http://c:4318/v1/traces', serviceName: 'pier', sampler: 'parentbased_always_on', ratio: 1, hintsPerSecond: 10, queueSpans: 2048 });
  t.like(parseTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/otlp/traces', OTEL_SERVICE_NAME: 'edge-1', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25', PIER_TRACE_HINTS_PER_S: '0', PIER_TRACE_QUEUE_SPANS: '64' }), {
    url: 'https://t.example/otlp/traces',
    serviceName: 'edge-1',
    sampler: 'parentbased_traceidratio',
    ratio: 0.25,
    hintsPerSecond: 0,
    queueSpans: 64,
  });
});

test('hostile: each bad value is one line naming its variable', (t) => {
  const bad: Array<[Record<string, string>, RegExp]> = [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: /],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://c' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: must be http/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://user:pw@c/v1/traces' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: no credentials/],
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, /^OTEL_TRACES_SAMPLER: one of /],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }, /^OTEL_TRACES_SAMPLER_ARG: a ratio/],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: 'half' }, /^OTEL_TRACES_SAMPLER_ARG: a ratio/],
    [{ OTEL_TRACES_SAMPLER_ARG: '0.5' }, /^OTEL_TRACES_SAMPLER_ARG: only a traceidratio sampler/],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: /],
    [{ OTEL_SDK_DISABLED: 'maybe' }, /^OTEL_SDK_DISABLED: /],
    [{ OTEL_SERVICE_NAME: 'x'.repeat(200) }, /^OTEL_SERVICE_NAME: /],
    [{ PIER_TRACE_QUEUE_SPANS: '1' }, /^PIER_TRACE_QUEUE_SPANS: /],
  ];
  for (const [env, message] of bad) {
    const err = t.throws(() => parseTracing(env), { instanceOf: ConfigError }, JSON.stringify(env));
    t.regex(err!.message, message);
    t.false(err!.message.includes('\n'));
  }
});

test('a log line written inside a traced request names its trace id; outside, none', (t) => {
  const lines: string[] = [];
  const out = new Writable({ write: (chunk: Buffer, _e, done) => (lines.push(chunk.toString()), done()) });
  const log = createLogger({ level: 'info', name: 't', destination: out });
  runInTrace({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, () => log.info('inside'));
  log.info('outside');
  t.is(JSON.parse(lines[0]).trace_id, '0af7651916cd43dd8448eb211c80319c');
  t.is(JSON.parse(lines[1]).trace_id, undefined);
});

import { ENV, integer, type Env } from '../config/config-env.js';
import { ConfigError } from '../config/config-error.js';

/** Tracing as configured (docs/operations.md "Tracing"): off unless an OTLP endpoint is given. */
export type TraceConfig = { export: false } | TraceExport;

export interface TraceExport {
  export: true;
  /** Where spans are posted (OTLP/HTTP): the traces endpoint itself. */
  url: string;
  serviceName: string;
  sampler: TraceSampler;
  /** The ratio of a `traceidratio` sampler (0 to 1). */
  ratio: number;
  /** A browser's sampled flag is followed at most this often a second (a hint, never a command). */
  hintsPerSecond: number;
  /** Spans ended and not yet exported, at most: past it, spans are dropped and counted. */
  queueSpans: number;
}

export const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;
export type TraceSampler = (typeof SAMPLERS)[number];

/**
 * The standard OpenTelemetry variables Pier reads, and its two of its own. A bad value is a
 * one-line error at start; export is off (and costs nothing) without an endpoint, with
 * `OTEL_TRACES_EXPORTER=none`, or with `OTEL_SDK_DISABLED=true`.
 */
export function parseTracing(env: Env): TraceConfig {
  const hintsPerSecond = integer(env, ENV.traceHintsPerSecond, 10, 0, 10_000);
  const queueSpans = integer(env, ENV.traceQueueSpans, 2_048, 64, 1_000_000);
  const disabled = env[ENV.otelSdkDisabled]?.trim().toLowerCase();
  if (disabled !== undefined && disabled !== '' && disabled !== 'true' && disabled !== 'false') throw new ConfigError(`${ENV.otelSdkDisabled}: must be true or false, got "${env[ENV.otelSdkDisabled]}"`);
  const exporter = env[ENV.otelTracesExporter]?.trim().toLowerCase() || 'otlp';
  if (exporter !== 'otlp' && exporter !== 'none') throw new ConfigError(`${ENV.otelTracesExporter}: Pier exports with otlp (OTLP/HTTP) or none, got "${env[ENV.otelTracesExporter]}"`);
  const sampler = (env[ENV.otelTracesSampler]?.trim().toLowerCase() || 'parentbased_always_on') as TraceSampler;
  if (!SAMPLERS.includes(sampler)) throw new ConfigError(`${ENV.otelTracesSampler}: one of ${SAMPLERS.join(', ')}, got "${env[ENV.otelTracesSampler]}"`);
  const ratio = parseRatio(env[ENV.otelTracesSamplerArg], sampler);
  const serviceName = env[ENV.otelServiceName]?.trim() || 'pier';
  if (serviceName.length > 128 || /[\x00-\x1f]/.test(serviceName)) throw new ConfigError(`${ENV.otelServiceName}: at most 128 printable characters`);
  const traces = env[ENV.otelTracesEndpoint]?.trim();
  const base = env[ENV.otelEndpoint]?.trim();
  const url = traces ? endpoint(traces, ENV.otelTracesEndpoint) : base ? joinTraces(endpoint(base, ENV.otelEndpoint)) : null;
  if (url === null || exporter === 'none' || disabled === 'true') return { export: false };
  return { export: true, url, serviceName, sampler, ratio, hintsPerSecond, queueSpans };
}

function parseRatio(raw: string | undefined, sampler: TraceSampler): number {
  if (raw === undefined || raw.trim() === '') return 1;
  const value = Number(raw);
  if (!/^\s*(0|1|0?\.\d+|1\.0*)\s*$/.test(raw) || !(value >= 0 && value <= 1)) throw new ConfigError(`${ENV.otelTracesSamplerArg}: a ratio from 0 to 1, got "${raw}"`);
  if (!sampler.endsWith('traceidratio')) throw new ConfigError(`${ENV.otelTracesSamplerArg}: only a traceidratio sampler takes a ratio (${ENV.otelTracesSampler} is ${sampler})`);
  return value;
}

function endpoint(raw: string, name: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name}: not a URL: "${raw.slice(0, 200)}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(`${name}: must be http:// or https:// (OTLP/HTTP), got ${url.protocol}`);
  if (url.username || url.password) throw new ConfigError(`${name}: no credentials in the URL (give them in OTEL_EXPORTER_OTLP_HEADERS)`);
  return url.toString();
}

/** The generic endpoint names the collector; traces go to its /v1/traces (the OTLP convention). */
const joinTraces = (base: string) => `${base.replace(/\/+$/, '')}/v1/traces`;

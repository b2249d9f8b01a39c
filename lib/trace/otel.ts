import { ROOT_CONTEXT, SpanKind as OtelKind, SpanStatusCode, trace, TraceFlags, type Context, type Link, type Span as OtelSpan } from '@opentelemetry/api';
import { ExportResultCode, TraceState, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { boundTracestate, currentTrace, formatTraceparent, parseTraceparent, type ParentTrust, type Span, type SpanAttributes, type SpanKind, type TraceCarrier, type TraceContext, type Tracer } from '../../bus/trace.js';
import type { TraceExport } from './config.js';

/** The attribute that tells the sampler whose parent a span has (bus/trace.ts `ParentTrust`). */
const PARENT_TRUST = 'pier.parent';

const KINDS: Record<SpanKind, OtelKind> = { server: OtelKind.SERVER, client: OtelKind.CLIENT, producer: OtelKind.PRODUCER, consumer: OtelKind.CONSUMER, internal: OtelKind.INTERNAL };

export interface OtelTracing {
  tracer: Tracer;
  /** Spans dropped because the export queue was full (the collector slow or gone). */
  dropped(): number;
  /** Exports that failed. */
  failures(): number;
  /** Sends what is queued (bounded by the exporter's timeout), then stops. */
  shutdown(): Promise<void>;
}

export interface OtelOptions {
  config: TraceExport;
  version: string;
  instanceId: string;
  roles: readonly string[];
  /** An export failure: called at most once a minute (a collector down is one line, not one a second). */
  onExportError: (message: string, failuresSoFar: number) => void;
}

/**
 * Spans made with OpenTelemetry's SDK and sent with its OTLP/HTTP exporter (docs/operations.md
 * "Tracing"). Bounded: at most `queueSpans` spans wait for export; past that they are dropped and
 * counted, so a slow or absent collector costs neither memory nor a request's time.
 */
export function startOtel(options: OtelOptions): OtelTracing {
  const { config } = options;
  const exporter = new OTLPTraceExporter({ url: config.url, timeoutMillis: 10_000 });
  let pending = 0;
  let dropped = 0;
  let failures = 0;
  let lastSaid = 0;
  const counted: SpanExporter = {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void) {
      exporter.export(spans, (result) => {
        pending -= spans.length;
        if (result.code !== ExportResultCode.SUCCESS) {
          failures++;
          const now = Date.now();
          if (now - lastSaid >= 60_000) {
            lastSaid = now;
            options.onExportError(String(result.error?.message ?? 'export failed').slice(0, 300), failures);
          }
        }
        done(result);
      });
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush(),
  };
  // The batch's own queue is larger than the bound kept here, so it never drops uncounted.
  const batch = new BatchSpanProcessor(counted, { maxQueueSize: config.queueSpans * 2, maxExportBatchSize: 512, scheduledDelayMillis: 1_000, exportTimeoutMillis: 30_000 });
  const bounded: SpanProcessor = {
    onStart: (span, ctx) => batch.onStart(span, ctx),
    onEnd(span) {
      if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
      if (pending >= config.queueSpans) {
        dropped++;
        return;
      }
      pending++;
      batch.onEnd(span);
    },
    forceFlush: () => batch.forceFlush(),
    shutdown: () => batch.shutdown(),
  };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName, 'service.version': options.version, 'service.instance.id': options.instanceId, 'pier.roles': options.roles.join(',') }),
    sampler: samplerFor(config),
    spanProcessors: [bounded],
    // What an attribute may hold is Pier's choice (names, codes, subjects); these only cap a mistake.
    spanLimits: { attributeValueLengthLimit: 256, attributeCountLimit: 32, linkCountLimit: 4, eventCountLimit: 8 },
  });
  const otel = provider.getTracer('pier', options.version);

  const contextOf = (span: OtelSpan, parent: Context): TraceContext => {
    const sc = span.spanContext();
    const tracestate = sc.traceState?.serialize();
    const native = trace.setSpan(parent, span);
    const traceparent = formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags);
    return tracestate ? { traceparent, tracestate, native } : { traceparent, native };
  };
  const wrap = (span: OtelSpan, parent: Context): Span => ({
    context: contextOf(span, parent),
    set: (k, v) => span.setAttribute(k, v),
    fail(code) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      span.setAttribute('error.type', code);
    },
    end: () => span.end(),
  });
  const linksOf = (links: readonly TraceContext[] | undefined): Link[] | undefined => {
    const out: Link[] = [];
    for (const l of links ?? []) {
      const p = parseTraceparent(l.traceparent);
      if (p) out.push({ context: { traceId: p.traceId, spanId: p.spanId, traceFlags: p.flags, isRemote: true } });
    }
    return out.length > 0 ? out : undefined;
  };

  const tracer: Tracer = {
    exporting: true,
    incoming(name, kind, carrier: TraceCarrier | undefined, trust: ParentTrust, attributes?: SpanAttributes, links?: readonly TraceContext[], startedAt?: number) {
      const remote = remoteParent(carrier);
      // An anonymous caller's parent is only linked: the span is a root, in a trace id Pier chose,
      // so neither its sampled flag nor a trace id picked to please a ratio sampler decides anything.
      const anonymous = trust === 'anonymous' && remote !== null;
      const parent = anonymous ? null : remote;
      const linked = anonymous ? [...(links ?? []), { traceparent: carrier!.traceparent! }] : links;
      const span = otel.startSpan(name, { kind: KINDS[kind], attributes: { ...attributes, [PARENT_TRUST]: remote ? trust : 'none' }, links: linksOf(linked), ...(startedAt === undefined ? {} : { startTime: startedAt }) }, parent ?? ROOT_CONTEXT);
      return wrap(span, parent ?? ROOT_CONTEXT);
    },
    child(name, kind, attributes?: SpanAttributes, given?: TraceContext) {
      const parent = given ?? currentTrace();
      if (!parent) return null;
      const ctx = (parent.native as Context | undefined) ?? remoteParent(parent);
      if (!ctx) return null;
      // Nothing to record under a parent that is not sampled: the work runs in the parent's context.
      if ((trace.getSpanContext(ctx)?.traceFlags ?? 0) & TraceFlags.SAMPLED) {
        return wrap(otel.startSpan(name, { kind: KINDS[kind], attributes }, ctx), ctx);
      }
      return null;
    },
  };
  return {
    tracer,
    dropped: () => dropped,
    failures: () => failures,
    async shutdown() {
      await provider.shutdown().catch(() => undefined);
    },
  };
}

/** A remote parent from a valid `traceparent` (and bounded `tracestate`), or null. */
function remoteParent(carrier: TraceCarrier | undefined): Context | null {
  const p = parseTraceparent(carrier?.traceparent);
  if (!p) return null;
  const state = boundTracestate(carrier?.tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: p.traceId, spanId: p.spanId, traceFlags: p.flags & TraceFlags.SAMPLED, isRemote: true, ...(state ? { traceState: new TraceState(state) } : {}) });
}

/**
 * The configured sampler, with one change for parents Pier does not trust: a browser's sampled
 * flag is followed at most `hintsPerSecond` times a second, and otherwise its span is sampled as a
 * root would be (a browser cannot make every process trace everything it sends).
 */
function samplerFor(config: TraceExport): Sampler {
  const root: Sampler = config.sampler.endsWith('always_on') ? new AlwaysOnSampler() : config.sampler.endsWith('always_off') ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(config.ratio);
  if (!config.sampler.startsWith('parentbased_')) return root;
  const hints = new RateLimit(config.hintsPerSecond);
  const sampled: SamplingResult = { decision: SamplingDecision.RECORD_AND_SAMPLED };
  const notSampled: SamplingResult = { decision: SamplingDecision.NOT_RECORD };
  return {
    shouldSample(ctx, traceId, name, kind, attributes, links) {
      const parent = trace.getSpanContext(ctx);
      if (!parent || !trace.isSpanContextValid(parent)) return root.shouldSample(ctx, traceId, name, kind, attributes, links);
      const parentSampled = (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
      if (parent.isRemote && attributes[PARENT_TRUST] === 'hint') {
        if (parentSampled && hints.take()) return sampled;
        return root.shouldSample(ctx, traceId, name, kind, attributes, links);
      }
      return parentSampled ? sampled : notSampled;
    },
    toString: () => `pier(${config.sampler}, browser hints ${config.hintsPerSecond}/s)`,
  };
}

/** At most `perSecond` takes in any second (a token bucket refilled continuously). */
class RateLimit {
  private tokens: number;
  private at = Date.now();
  constructor(private readonly perSecond: number) {
    this.tokens = perSecond;
  }

  take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.perSecond, this.tokens + ((now - this.at) / 1_000) * this.perSecond);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * W3C trace context through Pier (docs/operations.md "Tracing"): what every layer needs to take a
 * `traceparent` in, carry it across the bus and send it on, with or without spans. The spans and
 * their export are lib/trace/otel.ts's, installed at start (`useTracer`); until then, and whenever
 * export is off, the pass-through tracer below hands an incoming `traceparent` on unchanged and does
 * nothing else (no ids made, no span, nothing kept).
 */

/** The two headers of W3C trace context, as they arrive or leave (HTTP headers, bus headers, an event's field). */
export interface TraceCarrier {
  traceparent?: string;
  tracestate?: string;
}

/** A trace position work runs in: what is sent on, and the tracer's own handle (an OpenTelemetry context). */
export interface TraceContext {
  readonly traceparent: string;
  readonly tracestate?: string;
  readonly native?: unknown;
}

export type SpanKind = 'server' | 'client' | 'producer' | 'consumer' | 'internal';
export type SpanAttributes = Record<string, string | number | boolean>;
/**
 * Whose `traceparent` it is. `trusted`: a Pier process's, or an app's or the operator's whose
 * credentials the edge checked (its sampling decision is followed). `hint`: a browser's (its sampled
 * flag is a hint, followed under a rate limit). `anonymous`: a caller not authenticated (yet) on a
 * listener for apps and the operator: never followed; the work starts a trace of its own, linked to
 * the caller's, sampled as any root is (so a caller cannot choose a trace id the sampler keeps).
 */
export type ParentTrust = 'trusted' | 'hint' | 'anonymous';

export interface Span {
  /** The context the span's work runs in and sends on. */
  readonly context: TraceContext;
  set(key: string, value: string | number | boolean): void;
  /** The work failed: recorded by its code (a PierError's code or an HTTP status), never a message. */
  fail(code: string): void;
  end(): void;
}

export interface Tracer {
  /** Spans are made and exported (OTEL_* set); false: pass-through only. */
  readonly exporting: boolean;
  /**
   * Work that came in with `carrier` (a request, an upgrade, a bus message): a span, or null for none.
   * `startedAt` (a `performance.now()` reading) dates a span started after its work began: a request
   * whose caller had to be checked before its trace could be chosen.
   */
  incoming(name: string, kind: SpanKind, carrier: TraceCarrier | undefined, trust: ParentTrust, attributes?: SpanAttributes, links?: readonly TraceContext[], startedAt?: number): Span | null;
  /** Work done on behalf of `parent` (the current context unless given); null without one, or with export off. */
  child(name: string, kind: SpanKind, attributes?: SpanAttributes, parent?: TraceContext): Span | null;
}

/** A later version's extra fields are printable ASCII without spaces or commas (nothing a header could not carry). */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x2b\x2d-\x7e]*)?$/;
/** tracestate: at most 32 members (the W3C limit) and 512 characters; past either, members are dropped from the end. */
const TRACESTATE_MEMBERS = 32;
const TRACESTATE_CHARS = 512;
const MEMBER = /^[a-z0-9][_0-9a-z\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The parts of a valid `traceparent` (W3C level 1; a later version's extra fields are ignored), or null. */
export function parseTraceparent(value: string | undefined): { traceId: string; spanId: string; flags: number } | null {
  if (value === undefined || value.length < 55 || value.length > 256) return null;
  const m = TRACEPARENT.exec(value);
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return null;
  if (/^0+$/.test(m[2]) || /^0+$/.test(m[3])) return null;
  return { traceId: m[2], spanId: m[3], flags: parseInt(m[4], 16) };
}

/** `tracestate` as it may be passed on: its valid members, within the bounds; undefined when none. */
export function boundTracestate(value: string | undefined): string | undefined {
  if (value === undefined || value === '') return undefined;
  const kept: string[] = [];
  let chars = 0;
  for (const raw of value.slice(0, 8 * TRACESTATE_CHARS).split(',')) {
    const member = raw.trim();
    if (member === '' || !MEMBER.test(member)) continue;
    if (kept.length === TRACESTATE_MEMBERS || chars + member.length + (kept.length > 0 ? 1 : 0) > TRACESTATE_CHARS) break;
    chars += member.length + (kept.length > 0 ? 1 : 0);
    kept.push(member);
  }
  return kept.length > 0 ? kept.join(',') : undefined;
}

export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${flags.toString(16).padStart(2, '0')}`;
}

/** With export off: what came in is handed on as it came (valid, bounded), and nothing else happens. */
const passThrough: Tracer = {
  exporting: false,
  incoming(_name, _kind, carrier) {
    if (!carrier?.traceparent || !parseTraceparent(carrier.traceparent)) return null;
    const tracestate = boundTracestate(carrier.tracestate);
    const context: TraceContext = tracestate ? { traceparent: carrier.traceparent, tracestate } : { traceparent: carrier.traceparent };
    return { context, set() {}, fail() {}, end() {} };
  },
  child: () => null,
};

let tracer: Tracer = passThrough;
const current = new AsyncLocalStorage<TraceContext>();

/** Installs the process's tracer (lib/trace/otel.ts when export is on); `null` puts the pass-through back. */
export function useTracer(t: Tracer | null): void {
  tracer = t ?? passThrough;
}

export function activeTracer(): Tracer {
  return tracer;
}

/** The trace position the running work is in, if any. */
export function currentTrace(): TraceContext | undefined {
  return current.getStore();
}

/** Runs `fn` in `context` (its awaits, timers and callbacks too). */
export function runInTrace<T>(context: TraceContext | undefined, fn: () => T): T {
  return context ? current.run(context, fn) : fn();
}

/**
 * Runs `fn` in exactly `context`: with none, outside any trace. For work that outlives the request
 * that started it (a queue's loop, a retry timer), which would otherwise carry that request's trace on.
 */
export function onlyInTrace<T>(context: TraceContext | undefined, fn: () => T): T {
  return context ? current.run(context, fn) : current.exit(fn);
}

/** The headers that carry `context` on: none without one (pass `currentTrace()` for the running work's). */
export function traceHeaders(context: TraceContext | undefined): TraceCarrier | undefined {
  if (!context) return undefined;
  return context.tracestate ? { traceparent: context.traceparent, tracestate: context.tracestate } : { traceparent: context.traceparent };
}

/**
 * Runs `work` inside `span` (when there is one) and ends it when the work settles; a failure is
 * recorded by `codeOf(err)` and rethrown. Without a span, just the work.
 */
export async function inSpan<T>(span: Span | null, work: () => Promise<T>, codeOf: (err: unknown) => string = errorCode): Promise<T> {
  if (!span) return work();
  try {
    return await current.run(span.context, work);
  } catch (err) {
    span.fail(codeOf(err));
    throw err;
  } finally {
    span.end();
  }
}

/** A child span of the current work (`child`), around `work`: store writes, fsyncs, outbound calls. */
export function traced<T>(name: string, kind: SpanKind, work: () => Promise<T>, attributes?: SpanAttributes): Promise<T> {
  if (!tracer.exporting || !current.getStore()) return work();
  return inSpan(tracer.child(name, kind, attributes), work);
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z_]{1,40}$/.test(code) ? code : 'ERROR';
}

import { createServer, type Server } from 'node:http';
import { until } from './wait.js';

/** One span as a collector reads it from OTLP/HTTP JSON, flattened. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  attributes: Record<string, string | number | boolean>;
  links: Array<{ traceId: string; spanId: string }>;
  status: { code: number; message?: string };
  /** Every string in the span as received (attributes, events, status, links): what a hostile test reads. */
  raw: string;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const valueOf = (v: AnyValue): string | number | boolean => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue ?? ''));
const attrs = (list: Array<{ key: string; value: AnyValue }> | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));

/**
 * An OTLP/HTTP receiver for tests: what an OpenTelemetry Collector's `otlphttp` receiver accepts at
 * `/v1/traces` (JSON, as Pier's exporter sends it), kept in memory. `down()` makes it refuse.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  posts = 0;
  private constructor(private readonly server: Server) {}

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  static async start(): Promise<OtlpReceiver> {
    const server = createServer();
    const r = new OtlpReceiver(server);
    server.on('request', (req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => {
        if (req.url !== '/v1/traces' || req.method !== 'POST' || !String(req.headers['content-type']).includes('json')) {
          res.writeHead(415).end();
          return;
        }
        r.posts++;
        r.take(JSON.parse(Buffer.concat(parts).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return r;
  }

  private take(body: { resourceSpans?: Array<{ resource?: { attributes?: Array<{ key: string; value: AnyValue }> }; scopeSpans?: Array<{ spans?: any[] }> }> }): void {
    for (const rs of body.resourceSpans ?? []) {
      const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            service,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind,
            start: BigInt(s.startTimeUnixNano),
            end: BigInt(s.endTimeUnixNano),
            attributes: attrs(s.attributes),
            links: (s.links ?? []).map((l: { traceId: string; spanId: string }) => ({ traceId: l.traceId, spanId: l.spanId })),
            status: s.status ?? { code: 0 },
            raw: JSON.stringify(s),
          });
        }
      }
    }
  }

  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId).sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  }

  /** Waits for the trace to hold spans named as `names` (each at least once). */
  async waitFor(traceId: string, names: Array<string | RegExp>, timeoutMs = 20_000): Promise<ReceivedSpan[]> {
    return until(`spans ${names.join(', ')} of trace ${traceId}`, () => {
      const spans = this.trace(traceId);
      return names.every((n) => spans.some((s) => (typeof n === 'string' ? s.name === n : n.test(s.name)))) ? spans : null;
    }, timeoutMs);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The trace id and parent span id of a traceparent header. */
export function parentOf(traceparent: string | string[] | undefined): { traceId: string; spanId: string; sampled: boolean } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(String(traceparent ?? ''));
  if (!m) throw new Error(`not a traceparent: ${String(traceparent)}`);
  return { traceId: m[1], spanId: m[2], sampled: (parseInt(m[3], 16) & 1) === 1 };
}

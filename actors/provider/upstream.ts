import type { Readable } from 'node:stream';
import { Agent, errors, type Dispatcher } from 'undici';
import { PierError } from '../../bus/errors.js';
import { activeTracer, currentTrace, traceHeaders } from '../../bus/trace.js';
import { isPolicyRefusal, type AddressPolicy } from '../../lib/policy/address-policy.js';
import { policyConnector } from '../../lib/policy/policy-connector.js';

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
}

/**
 * HTTP out to providers. One keep-alive pool per provider origin (undici's Agent), so a slow
 * provider fills only its own connections. Nothing is retried: a provider call may not be
 * idempotent.
 */
export class Upstream {
  private readonly agent: Agent;

  /** Every connection is dialled to an address the policy allows, resolved here, at dial time. */
  constructor(policy: AddressPolicy) {
    this.agent = new Agent({ connections: 128, pipelining: 1, keepAliveTimeout: 30_000, connect: policyConnector(policy) });
  }

  async send(
    provider: string,
    url: { origin: string; path: string },
    init: { method: string; headers: Record<string, string>; body: Uint8Array | AsyncIterable<Uint8Array> | null; timeoutMs: number },
  ): Promise<UpstreamResponse> {
    // A span of the caller's trace (to the provider's answer headers), and its traceparent sent on:
    // the provider's host and path, never the query.
    const trace = currentTrace();
    const span = trace ? activeTracer().child(`${init.method} provider`, 'client', { 'pier.provider': provider, 'http.request.method': init.method, 'server.address': hostOf(url.origin), 'url.path': url.path.split('?')[0] }, trace) : null;
    const sent = span ?? trace ? { ...init.headers, ...traceHeaders(span?.context ?? trace) } : init.headers;
    try {
      // Straight to the agent with origin and path: the module's request() would parse a URL each call.
      const res = await this.agent.request({
        origin: url.origin,
        path: url.path,
        method: init.method as Dispatcher.HttpMethod,
        headers: sent,
        body: init.body as any,
        // Time to the answer's headers, then the longest silence inside its body.
        headersTimeout: init.timeoutMs,
        bodyTimeout: init.timeoutMs,
      });
      span?.set('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span?.fail(String(res.statusCode));
      return { status: res.statusCode, headers: res.headers, body: res.body };
    } catch (err) {
      const e = upstreamError(provider, init.timeoutMs, err);
      span?.fail(e.code);
      throw e;
    } finally {
      span?.end();
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** What went wrong talking to a provider, as the caller should hear it (no internal addresses). */
export function upstreamError(provider: string, timeoutMs: number, err: unknown): PierError {
  if (isPolicyRefusal(err)) {
    return new PierError('BAD_GATEWAY', `provider "${provider}" is not called: ${err.message}`);
  }
  if (err instanceof PierError) return err;
  const e = err as Error & { code?: string; name?: string };
  if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError || e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT') {
    return new PierError('TIMEOUT', `provider "${provider}" did not answer within ${timeoutMs} ms`, { cause: err });
  }
  const why = UNREACHABLE_BECAUSE[networkCode(err) ?? ''];
  return new PierError('BAD_GATEWAY', `provider "${provider}" is unreachable${why ? `: ${why}` : ''}`, { cause: err });
}

/**
 * Why a provider could not be reached, in words a developer can act on, and never its address
 * (the caller is another app: it learns what kind of failure, not where the provider lives).
 */
const UNREACHABLE_BECAUSE: Record<string, string> = {
  ENOTFOUND: "its endpoint's host name does not resolve",
  EAI_AGAIN: "its endpoint's host name does not resolve (the resolver did not answer)",
  ECONNREFUSED: 'its endpoint refused the connection (nothing listens there)',
  ECONNRESET: 'its endpoint closed the connection',
  EHOSTUNREACH: 'its endpoint cannot be reached (no route to it)',
  ENETUNREACH: 'its endpoint cannot be reached (no route to it)',
  UND_ERR_SOCKET: 'its endpoint closed the connection',
  UND_ERR_CONNECT_TIMEOUT: 'its endpoint did not accept the connection in time',
};

/** The system or undici error code of a failed request, where undici keeps it (the error or its cause). */
function networkCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | undefined;
  return [e?.code, e?.cause?.code].find((c): c is string => typeof c === 'string' && c in UNREACHABLE_BECAUSE);
}

/** The host of an origin, for a span (never a port's secrets: there are none, but no credentials either). */
function hostOf(origin: string): string {
  try {
    return new URL(origin).hostname;
  } catch {
    return '';
  }
}

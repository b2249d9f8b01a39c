import { errorFromAnswer, readJson } from '../errors.js';
import type { SystemFetch } from './system-fetch.js';

/** Which provider: the grant's (dataType, group, version) from the app's manifest. */
export interface ProviderSpec {
  dataType: string;
  group: string;
  version: string;
  /** How the provider is called: `v1` (JSON envelope) or `v2` (passed through); default from `version`. */
  shape?: 'v1' | 'v2';
}

export interface CallOptions {
  /** Query string for v2 calls, passed through untouched. */
  query?: string | Record<string, string>;
  /** Extra headers for v2 calls (content headers pass through to the provider). */
  headers?: Record<string, string>;
  /** Method for v2 calls (default POST). */
  method?: string;
  /**
   * The op as the manifest grants it, when that is not the op's name alone: the vault's grants
   * carry their workspace (`RetrieveSecret?workspace=chat`). Default: `op`.
   */
  grant?: string;
  signal?: AbortSignal;
}

/**
 * Calls to one provider. Each op gets its own access token (an app is often granted only some
 * ops; a token asked for ops it lacks would be refused whole).
 */
export class ProviderClient {
  constructor(
    private readonly app: SystemFetch,
    readonly spec: ProviderSpec,
  ) {}

  private get shape(): 'v1' | 'v2' {
    return this.spec.shape ?? (this.spec.version === 'v1' ? 'v1' : 'v2');
  }

  private path(op: string, query?: CallOptions['query']): string {
    const { dataType, group, version } = this.spec;
    const qs = query === undefined ? '' : typeof query === 'string' ? query.replace(/^\?/, '') : new URLSearchParams(query).toString();
    return `/system-server/v1alpha1/${encodeURIComponent(dataType)}/${encodeURIComponent(group)}/${encodeURIComponent(version)}/${encodeURIComponent(op)}${qs ? `?${qs}` : ''}`;
  }

  /**
   * v2: the provider's answer as it is (status, headers, a streamed body; `body` may itself be a
   * stream). v1: use `callJson`, which unwraps the envelope.
   */
  async call(op: string, body?: BodyInit | null, options: CallOptions = {}): Promise<Response> {
    const { dataType, group, version } = this.spec;
    return this.app.fetchWithToken({ dataType, group, version, ops: [options.grant ?? op] }, this.path(op, options.query), {
      method: options.method ?? 'POST',
      headers: options.headers,
      body: body ?? undefined,
      signal: options.signal,
    });
  }

  /**
   * A JSON call: v1 posts `data` in Pier's envelope and answers the provider's `data`; v2 posts
   * `data` as JSON and answers the provider's JSON. A failure is a typed PierError.
   */
  async callJson<T = unknown>(op: string, data: unknown = {}, options: Omit<CallOptions, 'headers'> = {}): Promise<T> {
    const res = await this.call(op, JSON.stringify(data), { ...options, headers: { 'content-type': 'application/json' } });
    const body = await readJson(res);
    const what = `provider ${this.spec.group}/${op}`;
    if (!res.ok) throw errorFromAnswer(res.status, body, what);
    if (this.shape === 'v2') return body as T;
    const envelope = body as { code?: unknown; data?: unknown } | undefined;
    if (envelope?.code !== 0) throw errorFromAnswer(502, envelope ?? { message: `${what} answered without an envelope` }, what);
    return envelope.data as T;
  }
}

import type { Counter, Histogram } from 'prom-client';
import type { Tallies } from '../../lib/runtime/metric-tally.js';

interface Series {
  upstream: { observe(v: number): void };
  calls: Map<number, { inc(): void }>;
}

/**
 * The provider actor's two series per call (calls by provider and status, time to the provider's
 * answer by provider), each looked up once and then tallied (lib/runtime/metric-tally.ts): prom-client
 * hashes the label object on every `inc` and `observe` otherwise. Bounded as prom-client's own
 * series are: the providers the registry holds, times the statuses given to callers.
 */
export class ProviderSeries {
  private readonly byProvider = new Map<string, Series>();

  constructor(
    private readonly tallies: Tallies,
    private readonly callsTotal: Counter<'provider' | 'status'>,
    private readonly upstreamSeconds: Histogram<'provider'>,
    private readonly buckets: readonly number[],
  ) {}

  observe(provider: string, status: number, seconds: number): void {
    let s = this.byProvider.get(provider);
    if (!s) this.byProvider.set(provider, (s = { upstream: this.tallies.histogram(this.upstreamSeconds, { provider }, this.buckets), calls: new Map() }));
    let calls = s.calls.get(status);
    if (!calls) s.calls.set(status, (calls = this.tallies.counter(this.callsTotal, { provider, status: String(status) })));
    calls.inc();
    s.upstream.observe(seconds);
  }
}

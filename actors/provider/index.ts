import { Counter, Histogram } from 'prom-client';
import { defineActor } from '../../lib/runtime/actor.js';
import { AccessTokens } from '../../lib/crypto/access-token.js';
import { AddressPolicy, networksList } from '../../lib/policy/address-policy.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { providerDeclaration } from './declaration.js';
import { authorise, callProvider, type ProviderDeps } from './handler.js';
import { Upstream } from './upstream.js';
import { ProviderSeries } from './metrics.js';
import { Tallies } from '../../lib/runtime/metric-tally.js';

interface ProviderActor {
  deps: ProviderDeps;
  upstream: Upstream;
}

const UPSTREAM_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30];

async function onStart(ctx: RoleContext): Promise<ProviderActor> {
  const registers = [ctx.metrics.registry];
  // Counted in plain numbers per call and handed to prom-client at each scrape (lib/runtime/metric-tally.ts).
  const tallies = new Tallies();
  const calls = new Counter({ name: 'pier_provider_calls_total', help: 'Provider calls, by provider and status given to the caller', labelNames: ['provider', 'status'], registers, collect: tallies.collect });
  const latency = new Histogram({
    name: 'pier_provider_upstream_seconds',
    help: 'Time from forwarding a call to the provider answering',
    labelNames: ['provider'],
    buckets: UPSTREAM_BUCKETS,
    registers,
    collect: tallies.collect,
  });
  const series = new ProviderSeries(tallies, calls, latency, UPSTREAM_BUCKETS);
  const upstream = new Upstream(new AddressPolicy(() => ctx.ownPorts, networksList(ctx.config.provider.networks)));
  const deps: ProviderDeps = {
    bus: ctx.bus,
    cache: ctx.cache,
    tokens: new AccessTokens(ctx.config.keyring),
    now: ctx.now,
    upstream,
    timeoutMs: ctx.config.provider.timeoutMs,
    bodyBytes: ctx.config.provider.bodyBytes,
    observe: (name, status, seconds) => series.observe(name, status, seconds),
  };
  ctx.log.info({ timeoutMs: deps.timeoutMs }, 'provider actor started');
  return { deps, upstream };
}

/** The provider-proxy actor (queue group `provider`): the only role that makes HTTP calls out. */
export const providerActor = defineActor(providerDeclaration, {
  serves: {
    call: (a: ProviderActor, req) => callProvider(a.deps, req),
    authorize: (a: ProviderActor, req) => ({ until: authorise(a.deps, req).claims.exp }),
  },
  onStart,
  onStop: (a) => a.upstream.close(),
});

import { Counter, Histogram } from 'prom-client';
import { serve } from '../../bus/rpc.js';
import { provider } from '../../bus/subjects.js';
import { AccessTokens } from '../../lib/access-token.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import { authorise, callProvider, type ProviderDeps } from './handler.js';
import { Upstream } from './upstream.js';
import { AddressPolicy, networksList } from '../../lib/address-policy.js';

/** The provider-proxy actor (queue group `provider`): the only role that makes HTTP calls out. */
export async function startProvider(ctx: RoleContext): Promise<Running> {
  const registers = [ctx.metrics.registry];
  const calls = new Counter({ name: 'pier_provider_calls_total', help: 'Provider calls, by provider and status given to the caller', labelNames: ['provider', 'status'], registers });
  const latency = new Histogram({
    name: 'pier_provider_upstream_seconds',
    help: 'Time from forwarding a call to the provider answering',
    labelNames: ['provider'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30],
    registers,
  });
  const upstream = new Upstream(new AddressPolicy(() => ctx.ownPorts, networksList(ctx.config.provider.networks)));
  const deps: ProviderDeps = {
    bus: ctx.bus,
    cache: ctx.cache,
    tokens: new AccessTokens(ctx.config.keyring),
    now: ctx.now,
    upstream,
    timeoutMs: ctx.config.provider.timeoutMs,
    bodyBytes: ctx.config.provider.bodyBytes,
    observe: (name, status, seconds) => {
      calls.inc({ provider: name, status: String(status) });
      latency.observe({ provider: name }, seconds);
    },
  };
  const hooks = { observe: ctx.metrics.observeActor };
  const subs = [
    serve(ctx.bus, provider.call, (req) => callProvider(deps, req), hooks),
    serve(ctx.bus, provider.authorize, (req) => ({ until: authorise(deps, req).claims.exp }), hooks),
  ];
  ctx.log.info({ timeoutMs: deps.timeoutMs }, 'provider actor started');
  return {
    async stop() {
      for (const sub of subs) sub.unsubscribe();
      await upstream.close();
    },
  };
}

import { Counter } from 'prom-client';
import { call, serve } from '../../bus/rpc.js';
import { registry, token } from '../../bus/subjects.js';
import { AccessTokens } from '../../lib/access-token.js';
import { FailureLimiter } from '../../lib/rate-limit.js';
import { SharedFailures } from './shared-failures.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import { BcryptPool } from './bcrypt-pool.js';
import { CheckGate } from './check-gate.js';
import { issueAccessToken, VerifiedProofs, type RefusalReason, type TokenDeps } from './handler.js';

/** Proof checks one client address may have running or waiting at once (429 above). */
const MAX_CHECKS_PER_CLIENT = 32;

/**
 * The token actor (queue group `token`): verifies an app's bcrypt proof in worker threads and
 * issues signed 5-minute access tokens. App secrets come from the registry on first use and are
 * forgotten when the app changes (uninstall, reinstall).
 */
export async function startToken(ctx: RoleContext): Promise<Running> {
  const { config } = ctx;
  const pool = new BcryptPool(config.token.bcryptThreads);
  const secrets = new Map<string, Promise<string>>();
  const forget = ctx.cache.onApplied((change) => {
    if (change.kind === 'app') secrets.clear();
  });
  const registers = [ctx.metrics.registry];
  const issued = new Counter({ name: 'pier_tokens_issued_total', help: 'Access tokens issued', registers });
  const refused = new Counter({ name: 'pier_tokens_refused_total', help: 'Access token requests refused, by reason', labelNames: ['reason'], registers });
  const notShared = new Counter({ name: 'pier_token_failures_not_shared_total', help: 'Failures counted by this replica that could not be shared with the others (PIER_STATE=jetstream)', registers });

  const failuresByKey = new FailureLimiter(config.token.failuresPerKey, config.token.failureWindowMs, ctx.now);
  const failuresByClient = new FailureLimiter(config.token.failuresPerClient, config.token.failureWindowMs, ctx.now);
  // On JetStream the limits hold across replicas and hosts; on LMDB (one host) they are per process.
  const shared =
    config.state.kind === 'jetstream' && ctx.jetstream
      ? await SharedFailures.start(ctx.jetstream.js, ctx.jetstream.manager, { key: failuresByKey, client: failuresByClient }, {
          replicas: config.state.replicas,
          windowMs: config.token.failureWindowMs,
          onNotShared: () => notShared.inc(),
        })
      : null;
  const deps: TokenDeps = {
    cache: ctx.cache,
    secretOf: (appKey) => {
      let s = secrets.get(appKey);
      if (!s) {
        s = call(ctx.bus, registry.appCredentials, { appKey }).then((c) => c.appSecret);
        s.catch(() => secrets.delete(appKey));
        secrets.set(appKey, s);
      }
      return s;
    },
    compare: (plain, hash) => pool.compare(plain, hash),
    tokens: new AccessTokens(config.keyring),
    now: ctx.now,
    windowMs: config.token.windowMs,
    failuresByKey,
    failuresByClient,
    failuresPerPair: config.token.failuresPerKey,
    gate: new CheckGate(MAX_CHECKS_PER_CLIENT),
    verified: new VerifiedProofs(),
    refused: (reason: RefusalReason) => refused.inc({ reason }),
  };
  const sub = serve(
    ctx.bus,
    token.issue,
    async (req) => {
      const out = await issueAccessToken(deps, req);
      issued.inc();
      return out;
    },
    { observe: ctx.metrics.observeActor },
  );
  ctx.log.info({ threads: config.token.bcryptThreads }, 'token actor started');
  return {
    async stop() {
      sub.unsubscribe();
      shared?.close();
      forget();
      await pool.close();
    },
  };
}

import { ask } from '../../bus/verbs.js';
import { Counter } from 'prom-client';
import { registry, token } from '../../bus/subjects.js';
import { defineActor } from '../../lib/runtime/actor.js';
import { AccessTokens } from '../../lib/crypto/access-token.js';
import { AppSecrets } from '../../lib/crypto/app-secrets.js';
import { FailureLimiter } from '../../lib/policy/rate-limit.js';
import { SharedFailures } from './shared-failures.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { BcryptPool } from './bcrypt-pool.js';
import { tokenDeclaration } from './declaration.js';
import { CheckGate } from './check-gate.js';
import { issueAccessToken, VerifiedProofs, type RefusalReason, type TokenDeps } from './handler.js';

/** bcrypt checks one client address may have running at once (the rest wait: never refused for it). */
const MAX_CHECKS_PER_CLIENT = 32;

interface TokenActor {
  deps: TokenDeps;
  secrets: AppSecrets;
  pool: BcryptPool;
  shared: SharedFailures | null;
  issued: Counter;
}

async function onStart(ctx: RoleContext): Promise<TokenActor> {
  const { config } = ctx;
  const registers = [ctx.metrics.registry];
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
          onError: (err, what) => ctx.log.error({ err }, `token failures: ${what} failed`),
        })
      : null;
  const secrets = new AppSecrets((appKey) => ask(ctx.bus, registry.appCredentials, { appKey }).then((c) => c.appSecret));
  const pool = new BcryptPool(config.token.bcryptThreads);
  const deps: TokenDeps = {
    cache: ctx.cache,
    secretOf: (appKey) => secrets.of(appKey, () => appKey),
    compare: (plain, hash) => pool.compare(plain, hash),
    tokens: new AccessTokens(config.keyring),
    now: ctx.now,
    windowMs: config.token.windowMs,
    failuresByKey,
    failuresByClient,
    failuresPerPair: config.token.failuresPerKey,
    answerWithinMs: token.issue.timeoutMs,
    // Past its failure limit a pair is checked at most once a second (slowed, not refused).
    gate: new CheckGate({ now: ctx.now, maxRunningPerClient: MAX_CHECKS_PER_CLIENT, slowMs: Math.min(1_000, Math.ceil(config.token.failureWindowMs / config.token.failuresPerKey)) }),
    verified: new VerifiedProofs(),
    refused: (reason: RefusalReason) => refused.inc({ reason }),
  };
  ctx.log.info({ threads: config.token.bcryptThreads }, 'token actor started');
  return { deps, secrets, pool, shared, issued: new Counter({ name: 'pier_tokens_issued_total', help: 'Access tokens issued', registers }) };
}

/**
 * The token actor (queue group `token`): verifies an app's bcrypt proof in worker threads and
 * issues signed 5-minute access tokens. App secrets come from the registry on first use and are
 * forgotten when any app changes (uninstall, reinstall).
 */
export const tokenActor = defineActor(tokenDeclaration, {
  serves: {
    issue: async (a: TokenActor, req) => {
      const out = await issueAccessToken(a.deps, req);
      a.issued.inc();
      return out;
    },
  },
  onRegistryChange: (a, change) => {
    if (change.kind === 'app') a.secrets.clear();
  },
  onStart,
  onStop: async (a) => {
    a.shared?.close();
    await a.pool.close();
  },
});

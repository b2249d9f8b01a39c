import { PierError } from '../../bus/errors.js';
import { BCRYPT_HASH, BCRYPT_MAX_COST, BCRYPT_MIN_COST, type IssueRequest, type IssuedAccess } from '../../bus/subjects.js';
import { ACCESS_TOKEN_TTL_MS, type AccessTokens } from '../../lib/crypto/access-token.js';
import type { FailureLimiter } from '../../lib/policy/rate-limit.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { sha256Hex } from '../../lib/crypto/tokens.js';
import type { CheckGate } from './check-gate.js';

export type RefusalReason = 'schema' | 'cost' | 'timestamp' | 'unknown_key' | 'rate_limited' | 'bad_proof' | 'proof_reused' | 'not_granted';

export interface TokenDeps {
  cache: RegistryCache;
  /** The app secret in clear (from the registry), by app key. */
  secretOf: (appKey: string) => Promise<string>;
  compare: (plain: string, hash: string) => Promise<boolean>;
  tokens: AccessTokens;
  now: () => number;
  windowMs: number;
  /** Failed proofs per (app key, client address): failures from elsewhere never lock an app out. */
  failuresByKey: FailureLimiter;
  /** Failed requests per client address. */
  failuresByClient: FailureLimiter;
  /** The failure limit of `failuresByKey`, which the gate keeps failures plus running checks under. */
  failuresPerPair: number;
  /** How long the caller waits for an answer (the endpoint's deadline): a proof still waiting past it is dropped unchecked. */
  answerWithinMs: number;
  gate: CheckGate;
  verified: VerifiedProofs;
  refused: (reason: RefusalReason) => void;
}

export type ProofOutcome = 'verified' | 'invalid' | 'reused';

/**
 * Proofs already verified, until their timestamp leaves the window, each bound to the `perm` it
 * was first used for. The proof (a bcrypt of key, timestamp and secret) does not cover `perm`, so a
 * captured one must not buy other ops: the identical request again is answered from here without a
 * second bcrypt (a client retrying), the same proof with another `perm` is `reused`. Identical
 * requests in flight share one hash; of concurrent ones with different perms, the first to finish wins.
 */
export class VerifiedProofs {
  private readonly done = new Map<string, { until: number; perm: string }>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(private readonly maxEntries = 50_000) {}

  async check(key: string, perm: string, validUntil: number, now: number, verify: () => Promise<boolean>): Promise<ProofOutcome> {
    const known = this.outcome(key, perm, now);
    if (known) return known;
    let inFlight = this.pending.get(key);
    if (!inFlight) {
      inFlight = verify().finally(() => this.pending.delete(key));
      this.pending.set(key, inFlight);
    }
    if (!(await inFlight)) return 'invalid';
    const raced = this.outcome(key, perm, now);
    if (raced) return raced;
    this.remember(key, { until: validUntil, perm }, now);
    return 'verified';
  }

  private outcome(key: string, perm: string, now: number): ProofOutcome | null {
    const seen = this.done.get(key);
    if (seen === undefined || seen.until <= now) return null;
    return seen.perm === perm ? 'verified' : 'reused';
  }

  private remember(key: string, entry: { until: number; perm: string }, now: number): void {
    if (this.done.size >= this.maxEntries) {
      for (const [k, e] of this.done) if (e.until <= now) this.done.delete(k);
      if (this.done.size >= this.maxEntries) this.done.delete(this.done.keys().next().value!);
    }
    this.done.set(key, entry);
  }
}

/** `perm` as one comparable string: the same ops in any order, repeated or not, are the same perm. */
export function permKey(perm: IssueRequest['perm']): string {
  return [perm.dataType, perm.group, perm.version, ...[...new Set(perm.ops)].sort()].join('\u0000');
}

function refuse(deps: TokenDeps, reason: RefusalReason, err: PierError): never {
  deps.refused(reason);
  throw err;
}

/** The checks of docs/protocol.md "Access tokens", cheapest first; bcrypt only when everything else holds. */
export async function issueAccessToken(deps: TokenDeps, req: IssueRequest): Promise<IssuedAccess> {
  const cost = Number(BCRYPT_HASH.exec(req.token)![1]);
  if (cost < BCRYPT_MIN_COST || cost > BCRYPT_MAX_COST) {
    refuse(deps, 'cost', new PierError('BAD_REQUEST', `token: bcrypt cost must be ${BCRYPT_MIN_COST} to ${BCRYPT_MAX_COST}, got ${cost}`));
  }
  const now = deps.now();
  if (Math.abs(now - req.timestamp * 1000) > deps.windowMs) {
    refuse(deps, 'timestamp', new PierError('UNAUTHORIZED', 'timestamp outside the accepted window'));
  }
  const pair = `${req.app_key}\u0000${req.client}`;
  // Over a failure limit a proof is slowed, never refused for it (check-gate.ts): on one host the
  // failures under an app's key may be another app's, which learnt the key as a provider.
  const slowed = () => deps.failuresByClient.blocked(req.client) || deps.failuresByKey.blocked(pair);
  const app = deps.cache.appByKey(req.app_key);
  if (!app) {
    deps.failuresByClient.fail(req.client);
    refuse(deps, 'unknown_key', new PierError('UNAUTHORIZED', 'unknown app key'));
  }

  const proofKey = sha256Hex(`${req.app_key}\0${req.timestamp}\0${req.token}`);
  const plain = `${req.app_key}${req.timestamp}`;
  // bcrypt runs only when admitted: per (key, address), failures plus checks running stay under the
  // limit, so concurrent bad proofs get at most the limit's worth of work; past it, one at a time,
  // spaced (check-gate.ts).
  const verify = async (): Promise<boolean> => {
    const release = await deps.gate.admit(pair, req.client, deps.failuresPerPair, () => deps.failuresByKey.count(pair), slowed, now + deps.answerWithinMs).catch((err: unknown) => {
      if (err instanceof PierError && err.code === 'RATE_LIMITED') deps.refused('rate_limited');
      throw err;
    });
    try {
      const ok = await deps.compare(plain + (await deps.secretOf(req.app_key)), req.token);
      if (!ok) {
        deps.failuresByClient.fail(req.client);
        deps.failuresByKey.fail(pair);
      }
      return ok;
    } finally {
      release();
    }
  };
  const outcome = await deps.verified.check(proofKey, permKey(req.perm), req.timestamp * 1000 + deps.windowMs, now, verify);
  if (outcome === 'reused') {
    deps.failuresByClient.fail(req.client);
    refuse(deps, 'proof_reused', new PierError('UNAUTHORIZED', 'proof already used'));
  }
  if (outcome === 'invalid') refuse(deps, 'bad_proof', new PierError('UNAUTHORIZED', 'token does not match the app key, timestamp and secret'));

  const { perm } = req;
  const grant = app.grants.find((g) => g.dataType === perm.dataType && g.group === perm.group && g.version === perm.version);
  const missing = perm.ops.filter((op) => !grant?.ops.includes(op));
  if (missing.length > 0) {
    refuse(deps, 'not_granted', new PierError('FORBIDDEN', `ops not granted to app "${app.name}" for ${perm.dataType}/${perm.group}/${perm.version}: ${missing.join(', ')}`, { data: { not_granted: missing } }));
  }

  const issuedAt = deps.now();
  const exp = issuedAt + ACCESS_TOKEN_TTL_MS;
  const access = deps.tokens.sign({ app: app.id, key: app.appKey, dataType: perm.dataType, group: perm.group, version: perm.version, ops: [...new Set(perm.ops)], iat: issuedAt, exp });
  return { access_token: access, expired_at: new Date(exp).toISOString() };
}

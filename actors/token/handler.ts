import { PierError } from '../../bus/errors.js';
import { BCRYPT_HASH, BCRYPT_MAX_COST, BCRYPT_MIN_COST, type IssueRequest, type IssuedAccess } from '../../bus/subjects.js';
import { ACCESS_TOKEN_TTL_MS, type AccessTokens } from '../../lib/access-token.js';
import type { FailureLimiter } from '../../lib/rate-limit.js';
import type { RegistryCache } from '../../lib/registry-cache.js';
import { sha256Hex } from '../../lib/tokens.js';

export type RefusalReason = 'schema' | 'cost' | 'timestamp' | 'unknown_key' | 'rate_limited' | 'bad_proof' | 'not_granted';

export interface TokenDeps {
  cache: RegistryCache;
  /** The app secret in clear (from the registry), by app key. */
  secretOf: (appKey: string) => Promise<string>;
  compare: (plain: string, hash: string) => Promise<boolean>;
  tokens: AccessTokens;
  now: () => number;
  windowMs: number;
  failuresByKey: FailureLimiter;
  failuresByClient: FailureLimiter;
  verified: VerifiedProofs;
  refused: (reason: RefusalReason) => void;
}

/**
 * Proofs already verified, until their timestamp leaves the window: an identical request is not
 * hashed twice, and identical requests in flight share one hash.
 */
export class VerifiedProofs {
  private readonly done = new Map<string, number>();
  private readonly pending = new Map<string, Promise<boolean>>();

  constructor(private readonly maxEntries = 50_000) {}

  async check(key: string, validUntil: number, now: number, verify: () => Promise<boolean>): Promise<boolean> {
    const until = this.done.get(key);
    if (until !== undefined && until > now) return true;
    const inFlight = this.pending.get(key);
    if (inFlight) return inFlight;
    const p = verify().finally(() => this.pending.delete(key));
    this.pending.set(key, p);
    const ok = await p;
    if (ok) this.remember(key, validUntil, now);
    return ok;
  }

  private remember(key: string, until: number, now: number): void {
    if (this.done.size >= this.maxEntries) {
      for (const [k, u] of this.done) if (u <= now) this.done.delete(k);
      if (this.done.size >= this.maxEntries) this.done.delete(this.done.keys().next().value!);
    }
    this.done.set(key, until);
  }
}

function refuse(deps: TokenDeps, reason: RefusalReason, err: PierError): never {
  deps.refused(reason);
  throw err;
}

/** The checks of CONTRACT.md section 3, cheapest first; bcrypt only when everything else holds. */
export async function issueAccessToken(deps: TokenDeps, req: IssueRequest): Promise<IssuedAccess> {
  const cost = Number(BCRYPT_HASH.exec(req.token)![1]);
  if (cost < BCRYPT_MIN_COST || cost > BCRYPT_MAX_COST) {
    refuse(deps, 'cost', new PierError('BAD_REQUEST', `token: bcrypt cost must be ${BCRYPT_MIN_COST} to ${BCRYPT_MAX_COST}, got ${cost}`));
  }
  const now = deps.now();
  if (Math.abs(now - req.timestamp * 1000) > deps.windowMs) {
    refuse(deps, 'timestamp', new PierError('UNAUTHORIZED', 'timestamp outside the accepted window'));
  }
  if (deps.failuresByClient.blocked(req.client) || deps.failuresByKey.blocked(req.app_key)) {
    refuse(deps, 'rate_limited', new PierError('RATE_LIMITED', 'too many failed token requests; retry later'));
  }
  const app = deps.cache.appByKey(req.app_key);
  if (!app) {
    deps.failuresByClient.fail(req.client);
    refuse(deps, 'unknown_key', new PierError('UNAUTHORIZED', 'unknown app key'));
  }

  const proofKey = sha256Hex(`${req.app_key}\0${req.timestamp}\0${req.token}`);
  const plain = `${req.app_key}${req.timestamp}`;
  const valid = await deps.verified.check(proofKey, req.timestamp * 1000 + deps.windowMs, now, async () => deps.compare(plain + (await deps.secretOf(req.app_key)), req.token));
  if (!valid) {
    deps.failuresByClient.fail(req.client);
    deps.failuresByKey.fail(req.app_key);
    refuse(deps, 'bad_proof', new PierError('UNAUTHORIZED', 'token does not match the app key, timestamp and secret'));
  }

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

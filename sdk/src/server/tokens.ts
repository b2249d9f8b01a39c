import { traceHeaders } from './trace.js';
import bcrypt from 'bcryptjs';
import { errorFromAnswer, NetworkError, readJson, UnauthorizedError } from '../errors.js';

/** The access endpoint names a stale proof by its answer's text alone (its HTTP code is a plain 401). */
const STALE_PROOF = /timestamp/;

/** What an access token is asked for (docs/protocol.md "Access tokens"): ops under one (dataType, group, version). */
export interface Perm {
  dataType: string;
  group: string;
  version: string;
  ops: string[];
}

/** The body of `POST /permission/v1alpha1/access`, as Pier reads it. */
export interface AccessRequestBody {
  app_key: string;
  /** Unix seconds, on Pier's clock. */
  timestamp: number;
  /** bcrypt of `app_key + timestamp + app_secret`. */
  token: string;
  perm: Perm;
}

/** `data` of Pier's answer to it. */
export interface IssuedAccess {
  access_token: string;
  /** RFC 3339. */
  expired_at: string;
}

export interface AccessToken {
  token: string;
  /** When Pier stops accepting it, on this process's clock (ms since the epoch). */
  expiresAt: number;
}

export interface TokenOptions {
  /** Refresh this long before expiry (default 60 s, at most a fifth of the lifetime). */
  refreshBeforeMs?: number;
  /** bcrypt cost of the proof (default 10; Pier accepts 4..12). */
  cost?: number;
  /** This process's clock (tests move it). */
  now?: () => number;
  /** Called with each token Pier issued (counting, logging; never log the token itself). */
  onIssued?: (perm: Perm) => void;
}

/** Pier issues tokens for exactly five minutes (docs/protocol.md "Access tokens"): its clock is expired_at minus that. */
const LIFETIME_MS = 5 * 60_000;
/** Distinct perms cached at once: an app has a handful; the bound only stops a runaway caller. */
const MAX_CACHED = 256;
/** Pier's proof window (±30 s by default): a clock further off than this cannot make a proof. */
const WINDOW_MS = 30_000;

/**
 * Access tokens of one app: a bcrypt proof of key and secret buys one per perm; it is cached and
 * replaced before it expires, and concurrent callers of the same perm share one request.
 */
export class AccessTokens {
  private readonly cache = new Map<string, AccessToken>();
  private readonly inflight = new Map<string, Promise<AccessToken>>();
  /** Pier's clock minus this process's clock, learnt from its answers. */
  private skewMs = 0;
  private readonly now: () => number;

  constructor(
    private readonly systemServer: string,
    private readonly appKey: string,
    private readonly appSecret: string,
    private readonly options: TokenOptions = {},
  ) {
    this.now = options.now ?? Date.now;
  }

  /** A token for `perm`: the cached one while it is fresh, else a new one (one request per perm at a time). */
  async get(perm: Perm): Promise<string> {
    const key = keyOf(perm);
    const cached = this.cache.get(key);
    if (cached && this.now() < cached.expiresAt - this.margin()) return cached.token;
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.issue(perm).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return (await pending).token;
  }

  /** Forgets `token` for `perm` (Pier refused it: the app was reinstalled, its key revoked). */
  invalidate(perm: Perm, token: string): void {
    const key = keyOf(perm);
    if (this.cache.get(key)?.token === token) this.cache.delete(key);
  }

  private margin(): number {
    return Math.min(this.options.refreshBeforeMs ?? 60_000, LIFETIME_MS / 5);
  }

  private async issue(perm: Perm, retried = false): Promise<AccessToken> {
    const timestamp = Math.floor((this.now() + this.skewMs) / 1000);
    const proof = await bcrypt.hash(`${this.appKey}${timestamp}${this.appSecret}`, this.options.cost ?? 10);
    const sentAt = this.now();
    let res: Response;
    try {
      res = await fetch(`http://${this.systemServer}/permission/v1alpha1/access`, {
        method: 'POST',
        headers: { ...traceHeaders(), 'content-type': 'application/json' },
        body: JSON.stringify({ app_key: this.appKey, timestamp, token: proof, perm } satisfies AccessRequestBody),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new NetworkError(`the token endpoint at ${this.systemServer} is unreachable`, { cause: err });
    }
    const body = await readJson(res);
    if (res.status !== 200 || (body as { code?: unknown })?.code !== 0) {
      const err = errorFromAnswer(res.status, body, 'the token endpoint');
      // A clock far off Pier's makes every proof stale: learn Pier's clock from its Date and try once more.
      if (!retried && err instanceof UnauthorizedError && STALE_PROOF.test(err.message) && this.learnSkewFromDate(res, sentAt)) return this.issue(perm, true);
      throw err;
    }
    const data = (body as { data?: { [K in keyof IssuedAccess]?: unknown } }).data;
    const expiredAt = typeof data?.expired_at === 'string' ? Date.parse(data.expired_at) : NaN;
    if (typeof data?.access_token !== 'string' || Number.isNaN(expiredAt)) throw errorFromAnswer(502, { message: 'the token endpoint answered without a token' }, 'the token endpoint');
    // Pier's clock at issue, against ours halfway through the request.
    const skew = expiredAt - LIFETIME_MS - (sentAt + this.now()) / 2;
    if (Math.abs(skew - this.skewMs) > 2_000) this.skewMs = skew;
    const token: AccessToken = { token: data.access_token, expiresAt: expiredAt - this.skewMs };
    if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(keyOf(perm), token);
    this.options.onIssued?.(perm);
    return token;
  }

  private learnSkewFromDate(res: Response, sentAt: number): boolean {
    const date = Date.parse(res.headers.get('date') ?? '');
    if (Number.isNaN(date)) return false;
    const skew = date - (sentAt + this.now()) / 2;
    if (Math.abs(skew - this.skewMs) < WINDOW_MS) return false; // the clock is not what is wrong
    this.skewMs = skew;
    return true;
  }
}

function keyOf(perm: Perm): string {
  return JSON.stringify([perm.dataType, perm.group, perm.version, [...perm.ops].sort()]);
}

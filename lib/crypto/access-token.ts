import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { PierError } from '../../bus/errors.js';
import type { Keyring } from './keyring.js';
import { tokenKey } from './tokens.js';

/** What an access token grants: one app, ops of one (dataType, group, version), until `exp`. */
export interface AccessClaims {
  /** `<user>/<app>` */
  app: string;
  /** The app key at issue: a reinstall or key rotation makes older tokens dead. */
  key: string;
  dataType: string;
  group: string;
  version: string;
  ops: string[];
  /** Issued at / expires at, Unix milliseconds. */
  iat: number;
  exp: number;
}

export const ACCESS_TOKEN_TTL_MS = 5 * 60 * 1000;
const PREFIX = 'pat1';

/**
 * Access tokens are signed (HMAC-SHA256, key derived from the master key), so any replica of any
 * actor verifies them alone, with no shared cache. Revocation comes from the registry: the token
 * names the app key it was issued to, and the verifier checks that key is still installed.
 */
export class AccessTokens {
  private readonly key: Buffer;
  /** During a master-key rotation, tokens signed under the previous key stay good until they expire. */
  private readonly previousKey: Buffer | null;
  /** Tokens already checked, with their claims: a token is used many times in its 5 minutes. By their end (`tokenKey`). */
  private readonly checked = new Map<string, { token: string; claims: AccessClaims }>();
  private static readonly MAX_CHECKED = 10_000;

  constructor(keyring: Keyring) {
    const derive = (k: Buffer) => Buffer.from(hkdfSync('sha256', k, 'pier', 'access-token v1', 32));
    this.key = derive(keyring.current);
    this.previousKey = keyring.previous ? derive(keyring.previous) : null;
  }

  sign(claims: AccessClaims): string {
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return `${PREFIX}.${payload}.${this.mac(payload, this.key)}`;
  }

  /** The claims of a genuine, unexpired token; 401 for anything else (the reason stays vague on purpose). */
  verify(token: string, nowMs: number): AccessClaims {
    const key = tokenKey(token);
    const known = this.checked.get(key);
    if (known !== undefined && known.token === token) {
      if (!(nowMs < known.claims.exp)) throw new PierError('UNAUTHORIZED', 'access token has expired');
      return known.claims;
    }
    const claims = this.check(token, nowMs);
    // Another token of the same end is replaced (a genuine token's end is its MAC: never, in practice).
    if (known === undefined && this.checked.size >= AccessTokens.MAX_CHECKED) this.checked.delete(this.checked.keys().next().value!);
    this.checked.set(key, { token, claims });
    return claims;
  }

  private check(token: string, nowMs: number): AccessClaims {
    const parts = token.split('.');
    if (parts.length !== 3 || parts[0] !== PREFIX) throw new PierError('UNAUTHORIZED', 'access token is invalid');
    const given = Buffer.from(parts[2]);
    const matches = (key: Buffer) => {
      const expected = Buffer.from(this.mac(parts[1], key));
      return given.length === expected.length && timingSafeEqual(given, expected);
    };
    if (!matches(this.key) && !(this.previousKey && matches(this.previousKey))) throw new PierError('UNAUTHORIZED', 'access token is invalid');
    let claims: AccessClaims;
    try {
      claims = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as AccessClaims;
    } catch {
      throw new PierError('UNAUTHORIZED', 'access token is invalid');
    }
    if (!(nowMs < claims.exp)) throw new PierError('UNAUTHORIZED', 'access token has expired');
    return claims;
  }

  private mac(payload: string, key: Buffer): string {
    return createHmac('sha256', key).update(PREFIX).update('.').update(payload).digest('base64url');
  }
}

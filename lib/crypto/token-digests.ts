import { sha256Hex } from './tokens.js';

/**
 * A token's SHA-256, remembered for users' live tokens (a hash per call is a few per cent of a
 * vault read). A pure function of the token, so never wrong; only a token that names a user is
 * kept, so made-up ones (of any length) keep nothing and cost what they did before, and the memo
 * is emptied when a token is revoked, so no revoked token stays in memory. Bounded in entries.
 */
export class TokenDigests {
  private readonly digests = new Map<string, string>();

  constructor(private readonly max = 4_096) {}

  /** The token's digest; kept when `live` says the digest names a user's token. */
  of(token: string, live: (digest: string) => boolean): string {
    const known = this.digests.get(token);
    if (known !== undefined) return known;
    const digest = sha256Hex(token);
    if (live(digest)) {
      if (this.digests.size >= this.max) this.digests.clear();
      this.digests.set(token, digest);
    }
    return digest;
  }

  clear(): void {
    this.digests.clear();
  }
}

import { createHmac } from 'node:crypto';

/** Apps whose secrets one process keeps at most (the oldest is dropped past it, fetched again when needed). */
const MAX_KEPT = 10_000;

/**
 * An app's callback key: what gateway and upload callbacks are signed with (docs/gateway.md,
 * "Verifying a callback"). Derived from the app secret, so the callback role never holds the secret
 * itself and an app derives the same key from what it has.
 */
export const callbackKeyOf = (appSecret: string): string => createHmac('sha256', appSecret).update('pier callback key v1').digest('hex');

/**
 * App secrets (or keys derived from them), fetched from the registry on first use (sealed on a
 * wire to the asking role's anchored key) and kept in memory: the token actor bcrypts proofs with
 * app secrets, the callback actor signs with callback keys. A failed fetch is not kept. Each actor says when to forget (its own rule: the token
 * actor on any app change, the callback actor on a reinstall only, so a close after an uninstall
 * is still signed).
 */
export class AppSecrets {
  private readonly kept = new Map<string, Promise<string>>();

  constructor(private readonly fetch: (appKey: string) => Promise<string>) {}

  /**
   * The secret kept under `key`, or else fetched for the app `appKey` names now (undefined: an
   * app not installed, refused). What is kept is used first: a close after an uninstall is signed.
   */
  of(key: string, appKey: () => string | undefined): Promise<string> {
    let s = this.kept.get(key);
    if (!s) {
      const current = appKey();
      if (current === undefined) return Promise.reject(new Error(`app ${key} is not installed`));
      s = this.fetch(current);
      const fetched = s;
      fetched.catch(() => this.kept.get(key) === fetched && this.kept.delete(key));
      if (this.kept.size >= MAX_KEPT) this.kept.delete(this.kept.keys().next().value!);
      this.kept.set(key, s);
    }
    return s;
  }

  forget(key: string): void {
    this.kept.delete(key);
  }

  clear(): void {
    this.kept.clear();
  }
}

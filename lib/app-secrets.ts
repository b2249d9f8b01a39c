import type { Bus } from '../bus/bus.js';
import { call } from '../bus/rpc.js';
import { registry } from '../bus/subjects.js';

/** Apps whose secrets one process keeps at most (the oldest is dropped past it, fetched again when needed). */
const MAX_KEPT = 10_000;

/**
 * App secrets, fetched from the registry on first use (`registry.appCredentials`, sealed on a
 * wire) and kept in memory: the token actor bcrypts proofs with them, the callback actor signs
 * with them. A failed fetch is not kept. Each actor says when to forget (its own rule: the token
 * actor on any app change, the callback actor on a reinstall only, so a close after an uninstall
 * is still signed).
 */
export class AppSecrets {
  private readonly kept = new Map<string, Promise<string>>();

  constructor(private readonly bus: Bus) {}

  /**
   * The secret kept under `key`, or else fetched for the app `appKey` names now (undefined: an
   * app not installed, refused). What is kept is used first: a close after an uninstall is signed.
   */
  of(key: string, appKey: () => string | undefined): Promise<string> {
    let s = this.kept.get(key);
    if (!s) {
      const current = appKey();
      if (current === undefined) return Promise.reject(new Error(`app ${key} is not installed`));
      s = call(this.bus, registry.appCredentials, { appKey: current }).then((c) => c.appSecret);
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

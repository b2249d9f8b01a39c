import { appId } from '../../bus/ids.js';
import type { AppView, Change, ProviderView, Snapshot } from '../../bus/subjects.js';
import type { TokenDigests } from '../crypto/token-digests.js';

/**
 * The registry's records as a cache holds them (./registry-cache.ts): a snapshot loaded, changes
 * applied on top, and the lookups the edge and the actors make. Whether it may answer (fresh, in
 * order) is the cache's to decide, not this one's.
 */
export class RegistryView {
  private tokens = new Map<string, string>();
  private users = new Set<string>();
  private apps = new Map<string, AppView>();
  private appsByKey = new Map<string, AppView>();
  private providers = new Map<string, ProviderView>();
  /** Active providers by `user, dataType, group, version`: the provider-call hot path. */
  private activeByTarget = new Map<string, ProviderView>();

  /** `digests`: the digests of the tokens asked about that are remembered (the cache's: ./registry-cache.ts). */
  constructor(private readonly digests: TokenDigests) {}

  /** Everything as the snapshot has it (what was held before is dropped). */
  load(snap: Snapshot): void {
    this.tokens = new Map(snap.tokens.map((t) => [t.digest, t.user]));
    this.digests.clear();
    this.users = new Set(snap.users.map((u) => u.name));
    this.apps = new Map(snap.apps.map((a) => [a.id, a]));
    this.appsByKey = new Map(snap.apps.map((a) => [a.appKey, a]));
    this.providers = new Map(snap.providers.map((p) => [p.name, p]));
    this.indexProviders();
  }

  /** One change event's changes, in order. */
  apply(changes: readonly Change[]): void {
    for (const c of changes) {
      if (c.kind === 'user') this.users.add(c.value.name);
      else if (c.kind === 'token' && c.op === 'put') this.tokens.set(c.value.digest, c.value.user);
      else if (c.kind === 'token' && c.op === 'delete') {
        this.tokens.delete(c.key);
        this.digests.clear();
      }
      else if (c.kind === 'app' && c.op === 'put') {
        this.apps.set(c.value.id, c.value);
        this.appsByKey.set(c.value.appKey, c.value);
      } else if (c.kind === 'app' && c.op === 'delete') {
        const old = this.apps.get(c.key);
        this.apps.delete(c.key);
        if (old) this.appsByKey.delete(old.appKey);
      } else if (c.kind === 'provider' && c.op === 'put') this.providers.set(c.value.name, c.value);
      else if (c.kind === 'provider' && c.op === 'delete') this.providers.delete(c.key);
    }
    if (changes.some((c) => c.kind === 'provider')) this.indexProviders();
  }

  userExists(name: string): boolean {
    return this.users.has(name);
  }

  /** The user a token belongs to, or undefined when the token is unknown or revoked. */
  userForToken(token: string): string | undefined {
    const user = this.tokens.get(this.digests.of(token, (digest) => this.tokens.has(digest)));
    return user !== undefined && this.users.has(user) ? user : undefined;
  }

  /** Whether a token (by its SHA-256) is held. */
  hasToken(digest: string): boolean {
    return this.tokens.has(digest);
  }

  app(user: string, name: string): AppView | undefined {
    return this.apps.get(appId(user, name));
  }

  appsOf(user: string): AppView[] {
    return [...this.apps.values()].filter((a) => a.user === user);
  }

  appByKey(appKey: string): AppView | undefined {
    return this.appsByKey.get(appKey);
  }

  /** The active provider of a user for (dataType, group, version), if any. */
  activeProvider(user: string, dataType: string, group: string, version: string): ProviderView | undefined {
    return this.activeByTarget.get(`${user}\0${dataType}\0${group}\0${version}`);
  }

  private indexProviders(): void {
    this.activeByTarget = new Map();
    for (const p of this.providers.values()) {
      if (p.state === 'active') this.activeByTarget.set(`${p.user}\0${p.dataType}\0${p.group}\0${p.version}`, p);
    }
  }
}

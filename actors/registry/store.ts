import { traced } from '../../bus/trace.js';
import { open, type Database, type RootDatabase } from 'lmdb';
import { openRecords } from '../../lib/state/record-format.js';
import { durably } from '../../lib/state/lmdb-durable.js';
import type { AppView, Change, ChangeEvent, ProviderView, Snapshot, TokenView, UserView } from '../../bus/subjects.js';
import { settleLmdbFolder } from '../../lib/state/durable-files.js';

/** An app as stored: the shared view plus its secret, sealed with the master key. */
export interface AppRecord extends AppView {
  /** SHA-256 of the app secret: the registry checks presented secrets against it (appVerify). */
  secretDigest: string;
  secretSealed: Uint8Array;
}

/** The write side of one transaction: every change is recorded so it can be published afterwards. */
export interface Writer {
  putUser(user: UserView): void;
  putToken(token: TokenView): void;
  deleteToken(digest: string): void;
  putApp(app: AppRecord): void;
  deleteApp(app: AppRecord, purge: boolean): void;
  putProvider(provider: ProviderView): void;
  deleteProvider(name: string): void;
}

/**
 * What the registry keeps, whatever keeps it (LMDB on one host, or JetStream anywhere: docs/operations.md "How writes stay correct"). Reads are local; `write` runs `fn` and commits its changes as one event with the
 * next revision, or nothing; revisions are the same on every replica.
 */
export interface RegistryStore {
  /** Catches up with writes made anywhere so far (no-op where there is one writer environment). */
  sync(): Promise<void>;
  revision(): number;
  getUser(name: string): UserView | undefined;
  listUsers(): UserView[];
  listTokens(user?: string): TokenView[];
  getApp(id: string): AppRecord | undefined;
  appByKey(appKey: string): AppRecord | undefined;
  listApps(user?: string): AppRecord[];
  getProvider(name: string): ProviderView | undefined;
  listProviders(): ProviderView[];
  snapshot(): Snapshot;
  write<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }>;
  close(): Promise<void>;
}

/** The public form of a change: what caches get (no secret, no digest). */
export function publicChange(c: Change): Change {
  return c.kind === 'app' && 'value' in c ? { ...c, value: publicView(c.value as AppRecord) } : c;
}

export function publicView(app: AppRecord): AppView {
  // Neither the sealed secret nor its digest leaves the registry: others ask it (appVerify).
  const { secretSealed: _sealed, secretDigest: _digest, ...view } = app;
  return view;
}

/**
 * The registry's LMDB environment (`<data>/registry`). Replicas of the registry actor on one host
 * open the same environment: LMDB serialises their write transactions, and the revision counter is
 * read and bumped inside each one, so revisions are unique and increasing across replicas.
 */
export class LmdbRegistryStore implements RegistryStore {
  private constructor(
    private readonly root: RootDatabase,
    private readonly users: Database<UserView, string>,
    private readonly tokens: Database<TokenView, string>,
    private readonly apps: Database<AppRecord, string>,
    private readonly appKeys: Database<string, string>,
    private readonly providers: Database<ProviderView, string>,
    private readonly meta: Database<number, string>,
  ) {}

  static open(path: string): LmdbRegistryStore {
    const root = open({ path, compression: false });
    // The environment's folder and files, made by this open the first time, are on disk before any write is answered.
    settleLmdbFolder(path);
    return new LmdbRegistryStore(
      root,
      openRecords<UserView>(root, 'users', 'registry'),
      openRecords<TokenView>(root, 'tokens', 'registry'),
      openRecords<AppRecord>(root, 'apps', 'registry'),
      root.openDB<string, string>({ name: 'app-keys' }),
      openRecords<ProviderView>(root, 'providers', 'registry'),
      root.openDB<number, string>({ name: 'meta' }),
    );
  }

  /** One environment shared by the replicas of a host (lmdb-js renews its read snapshot every turn of the event loop). */
  async sync(): Promise<void> {}

  revision(): number {
    return this.meta.get('revision') ?? 0;
  }

  getUser(name: string): UserView | undefined {
    return this.users.get(name);
  }

  listUsers(): UserView[] {
    return [...this.users.getRange().map(({ value }) => value)];
  }

  listTokens(user?: string): TokenView[] {
    const all = [...this.tokens.getRange().map(({ value }) => value)];
    return user === undefined ? all : all.filter((t) => t.user === user);
  }

  getApp(id: string): AppRecord | undefined {
    return this.apps.get(id);
  }

  appByKey(appKey: string): AppRecord | undefined {
    const id = this.appKeys.get(appKey);
    return id === undefined ? undefined : this.apps.get(id);
  }

  listApps(user?: string): AppRecord[] {
    const range = user === undefined ? this.apps.getRange() : this.apps.getRange({ start: `${user}/`, end: `${user}/\uffff` });
    return [...range.map(({ value }) => value)];
  }

  getProvider(name: string): ProviderView | undefined {
    return this.providers.get(name);
  }

  listProviders(): ProviderView[] {
    return [...this.providers.getRange().map(({ value }) => value)];
  }

  /** Everything the caches need, read in one synchronous pass (one LMDB read snapshot). */
  snapshot(): Snapshot {
    return {
      revision: this.revision(),
      users: this.listUsers(),
      tokens: this.listTokens(),
      apps: this.listApps().map(publicView),
      providers: this.listProviders(),
    };
  }

  /**
   * Runs `fn` in one durable write transaction. `fn` may read (it sees its own writes) and throw
   * to abort. Resolves with its result and the change event to publish (revision bumped only when
   * something changed).
   */
  write<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }> {
    // A span of the request's trace while the change is durable (docs/operations.md "Tracing").
    return traced('lmdb commit', 'internal', () => this.commit(fn), { 'db.system': 'lmdb' });
  }

  private async commit<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }> {
    return durably(this.root, this.root.transaction(() => {
      const changes: Change[] = [];
      const w: Writer = {
        putUser: (value) => {
          this.users.put(value.name, value);
          changes.push({ kind: 'user', op: 'put', value });
        },
        putToken: (value) => {
          this.tokens.put(value.digest, value);
          changes.push({ kind: 'token', op: 'put', value });
        },
        deleteToken: (digest) => {
          this.tokens.remove(digest);
          changes.push({ kind: 'token', op: 'delete', key: digest });
        },
        putApp: (app) => {
          this.apps.put(app.id, app);
          this.appKeys.put(app.appKey, app.id);
          changes.push({ kind: 'app', op: 'put', value: publicView(app) });
        },
        deleteApp: (app, purge) => {
          this.apps.remove(app.id);
          this.appKeys.remove(app.appKey);
          changes.push({ kind: 'app', op: 'delete', key: app.id, purge, value: publicView(app) });
        },
        putProvider: (value) => {
          this.providers.put(value.name, value);
          changes.push({ kind: 'provider', op: 'put', value });
        },
        deleteProvider: (name) => {
          this.providers.remove(name);
          changes.push({ kind: 'provider', op: 'delete', key: name });
        },
      };
      const result = fn(w);
      if (changes.length === 0) return { result, event: null };
      const revision = this.revision() + 1;
      this.meta.put('revision', revision);
      return { result, event: { revision, changes } };
    }));
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}

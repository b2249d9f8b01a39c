import { traced } from '../../bus/trace.js';
import type { JetStreamClient, JetStreamManager } from 'nats';
import { registryState, type Change, type ChangeEvent, type ProviderView, type Snapshot, type TokenView, type UserView } from '../../bus/subjects.js';
import { ReplicatedLog, type LogState } from '../../lib/state/replicated-log.js';
import { publicChange, publicView, type AppRecord, type RegistryStore, type Writer } from './store.js';

/** The registry's state in memory, rebuilt by replaying the log (from its newest snapshot). */
class Model implements LogState<Change> {
  revision = 0;
  readonly users = new Map<string, UserView>();
  readonly tokens = new Map<string, TokenView>();
  readonly apps = new Map<string, AppRecord>();
  readonly appKeys = new Map<string, string>();
  readonly providers = new Map<string, ProviderView>();

  apply(changes: Change[]): void {
    for (const c of changes) {
      if (c.kind === 'user') this.users.set(c.value.name, c.value);
      else if (c.kind === 'token' && c.op === 'put') this.tokens.set(c.value.digest, c.value);
      else if (c.kind === 'token' && c.op === 'delete') this.tokens.delete(c.key);
      else if (c.kind === 'app' && c.op === 'put') {
        const app = c.value as AppRecord;
        this.apps.set(app.id, app);
        this.appKeys.set(app.appKey, app.id);
      } else if (c.kind === 'app' && c.op === 'delete') {
        const app = this.apps.get(c.key);
        this.apps.delete(c.key);
        if (app) this.appKeys.delete(app.appKey);
      } else if (c.kind === 'provider' && c.op === 'put') this.providers.set(c.value.name, c.value);
      else if (c.kind === 'provider' && c.op === 'delete') this.providers.delete(c.key);
    }
    this.revision++;
  }

  dump(): Dump {
    return { users: [...this.users.values()], tokens: [...this.tokens.values()], apps: [...this.apps.values()], providers: [...this.providers.values()] };
  }

  load(dump: unknown, revision: number): void {
    const d = dump as Dump;
    for (const u of d.users) this.users.set(u.name, u);
    for (const t of d.tokens) this.tokens.set(t.digest, t);
    for (const a of d.apps) {
      this.apps.set(a.id, a);
      this.appKeys.set(a.appKey, a.id);
    }
    for (const p of d.providers) this.providers.set(p.name, p);
    this.revision = revision;
  }
}

interface Dump {
  users: UserView[];
  tokens: TokenView[];
  apps: AppRecord[];
  providers: ProviderView[];
}

const sorted = <T>(xs: Iterable<T>, key: (x: T) => string) => [...xs].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

/**
 * The registry on JetStream (docs/operations.md "How writes stay correct"): its writes are a replicated log (a stream
 * with `replicas` copies, compacted by snapshots), every replica keeps the whole state in memory
 * by replaying it, so any number of equal registry replicas run on any hosts and none holds state
 * on its disk.
 */
export class JetStreamRegistryStore implements RegistryStore {
  private constructor(private readonly log: ReplicatedLog<Change, Model>) {}

  static async open(js: JetStreamClient, manager: () => Promise<JetStreamManager>, options: { replicas: number; snapshotEvery?: number; onError?: (err: unknown, what: string) => void }): Promise<JetStreamRegistryStore> {
    return new JetStreamRegistryStore(await ReplicatedLog.open(js, manager, registryState, { ...options, recordKind: 'registry', fresh: () => new Model() }));
  }

  private get model(): Model {
    return this.log.state;
  }

  /** Snapshots this replica wrote, and its reloads from a snapshot after a gap (tests). */
  get snapshotsWritten(): number {
    return this.log.snapshotsWritten;
  }

  get reloads(): number {
    return this.log.reloads;
  }

  /** Catches up with the log as it is now, wherever it was written (best effort within 1 s; concurrent callers share one). */
  sync(): Promise<void> {
    return this.log.sync();
  }

  revision(): number {
    return this.model.revision;
  }

  getUser(name: string): UserView | undefined {
    return this.model.users.get(name);
  }

  listUsers(): UserView[] {
    return sorted(this.model.users.values(), (u) => u.name);
  }

  listTokens(user?: string): TokenView[] {
    const all = sorted(this.model.tokens.values(), (t) => t.digest);
    return user === undefined ? all : all.filter((t) => t.user === user);
  }

  getApp(id: string): AppRecord | undefined {
    return this.model.apps.get(id);
  }

  appByKey(appKey: string): AppRecord | undefined {
    const id = this.model.appKeys.get(appKey);
    return id === undefined ? undefined : this.model.apps.get(id);
  }

  listApps(user?: string): AppRecord[] {
    const all = sorted(this.model.apps.values(), (a) => a.id);
    return user === undefined ? all : all.filter((a) => a.user === user);
  }

  getProvider(name: string): ProviderView | undefined {
    return this.model.providers.get(name);
  }

  listProviders(): ProviderView[] {
    return sorted(this.model.providers.values(), (p) => p.name);
  }

  snapshot(): Snapshot {
    return { revision: this.revision(), users: this.listUsers(), tokens: this.listTokens(), apps: this.listApps().map(publicView), providers: this.listProviders() };
  }

  /**
   * Runs `fn` on the state this replica has and appends its changes to the log naming that
   * revision; accepted, it is the next revision everywhere; refused, `fn` runs again (see ReplicatedLog).
   */
  write<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }> {
    // A span of the request's trace while the change is durable on a quorum (docs/operations.md "Tracing").
    return traced('jetstream publish', 'internal', () => this.publish(fn), { 'db.system': 'nats-jetstream' });
  }

  private async publish<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }> {
    const { result, changes, revision } = await this.log
      .write(() => {
        const changes: Change[] = [];
        const w: Writer = {
          putUser: (value) => void changes.push({ kind: 'user', op: 'put', value }),
          putToken: (value) => void changes.push({ kind: 'token', op: 'put', value }),
          deleteToken: (digest) => void changes.push({ kind: 'token', op: 'delete', key: digest }),
          putApp: (app) => void changes.push({ kind: 'app', op: 'put', value: app }),
          deleteApp: (app, purge) => void changes.push({ kind: 'app', op: 'delete', key: app.id, purge, value: app }),
          putProvider: (value) => void changes.push({ kind: 'provider', op: 'put', value }),
          deleteProvider: (name) => void changes.push({ kind: 'provider', op: 'delete', key: name }),
        };
        return { result: { result: fn(w), changes }, changes };
      })
      .then(({ result, revision }) => ({ ...result, revision }));
    return { result, event: revision === null ? null : { revision, changes: changes.map(publicChange) } };
  }

  close(): Promise<void> {
    return this.log.close();
  }
}

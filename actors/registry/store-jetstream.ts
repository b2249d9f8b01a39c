import { consumerOpts, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { PierError } from '../../bus/errors.js';
import { registryState, type Change, type ChangeEvent, type ProviderView, type Snapshot, type TokenView, type UserView } from '../../bus/subjects.js';
import { retryWhileStarting, SharedCatchUp, withinBudget } from '../../lib/jetstream.js';
import { publicChange, publicView, type AppRecord, type RegistryStore, type Writer } from './store.js';

/**
 * One write as the log carries it: every change (apps with their sealed secrets, which only
 * registry replicas read) and the revision its writer read. Replicas read the log in order and
 * accept an entry only if `expected` is the revision they are at: the first writer per revision
 * wins, the others re-run on the new state. The same rule on every replica: the same revisions.
 */
interface Entry {
  expected: number;
  changes: Change[];
}

/** The registry's state in memory, rebuilt by replaying the log. */
class Model {
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
      } else if (c.kind === 'provider') this.providers.set(c.value.name, c.value);
    }
    this.revision++;
  }
}

const sorted = <T>(xs: Iterable<T>, key: (x: T) => string) => [...xs].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

/**
 * The registry on JetStream (CONTRACT.md section 10): its writes are a replicated log (a stream
 * with `replicas` copies), every replica keeps the whole state in memory by replaying it, so any
 * number of equal registry replicas run on any hosts and none holds state on its disk.
 */
export class JetStreamRegistryStore implements RegistryStore {
  private readonly model = new Model();
  private applied = 0;
  /** Revision each accepted log entry produced, by stream sequence (for the writer waiting on it). */
  private readonly accepted = new Map<number, number>();
  private readonly waiters: Array<{ seq: number; wake: () => void }> = [];
  private stopReading: (() => void) | null = null;

  private constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
  ) {}

  static async open(js: JetStreamClient, manager: () => Promise<JetStreamManager>, options: { replicas: number }): Promise<JetStreamRegistryStore> {
    return retryWhileStarting(async () => {
      const jsm = await manager();
      const config = { name: registryState.stream, subjects: [registryState.subject], num_replicas: options.replicas, storage: StorageType.File, retention: RetentionPolicy.Limits };
      await jsm.streams.add(config).catch((err: unknown) => {
        if (!String((err as Error).message).includes('already in use')) throw err;
      });
      const store = new JetStreamRegistryStore(js, jsm);
      const last = (await jsm.streams.info(registryState.stream)).state.last_seq;
      await store.follow();
      await store.reached(last, 60_000);
      return store;
    });
  }

  /** Reads the log from its start, for ever (an ordered consumer re-creates itself after a node loss). */
  private async follow(): Promise<void> {
    const opts = consumerOpts();
    opts.orderedConsumer();
    opts.deliverAll();
    // Named, not looked up: the identity may not list streams.
    opts.bindStream(registryState.stream);
    const sub = await this.js.subscribe(registryState.subject, opts);
    this.stopReading = () => sub.unsubscribe();
    void (async () => {
      for await (const m of sub) this.apply(m.seq, m.data);
    })().catch(() => undefined);
  }

  private apply(seq: number, data: Uint8Array): void {
    if (seq <= this.applied) return;
    this.applied = seq;
    try {
      const entry = decode<Entry>(data);
      if (entry.expected === this.model.revision) {
        this.model.apply(entry.changes);
        this.accepted.set(seq, this.model.revision);
        if (this.accepted.size > 10_000) this.accepted.delete(this.accepted.keys().next().value!);
      }
    } catch {
      // not an entry of ours: never accepted
    }
    for (let i = this.waiters.length - 1; i >= 0; i--) if (this.waiters[i].seq <= this.applied) this.waiters.splice(i, 1)[0].wake();
  }

  private reached(seq: number, timeoutMs = 10_000): Promise<void> {
    if (seq <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new PierError('UNAVAILABLE', `registry: the log did not reach ${seq} in ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({ seq, wake: () => (clearTimeout(timer), resolve()) });
    });
  }

  private readonly catchUp = new SharedCatchUp(() => withinBudget(this.jsm.streams.info(registryState.stream).then((info) => this.reached(info.state.last_seq))));

  /** Catches up with the log as it is now, wherever it was written (best effort within 1 s; concurrent callers share one). */
  sync(): Promise<void> {
    return this.catchUp.run();
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
   * Runs `fn` on the state this replica has, appends its changes naming that revision, and waits
   * for the entry to come back through the log: accepted, it is the next revision everywhere;
   * refused (another write took that revision), `fn` runs again on the new state.
   */
  async write<T>(fn: (w: Writer) => T): Promise<{ result: T; event: ChangeEvent | null }> {
    // Decide on everything written anywhere so far (a write just answered by another replica
    // included): a user added through one replica is there when an app is installed through another.
    await this.sync();
    for (let attempt = 0; attempt < 50; attempt++) {
      const expected = this.model.revision;
      const changes: Change[] = [];
      const w: Writer = {
        putUser: (value) => void changes.push({ kind: 'user', op: 'put', value }),
        putToken: (value) => void changes.push({ kind: 'token', op: 'put', value }),
        deleteToken: (digest) => void changes.push({ kind: 'token', op: 'delete', key: digest }),
        putApp: (app) => void changes.push({ kind: 'app', op: 'put', value: app }),
        deleteApp: (app, purge) => void changes.push({ kind: 'app', op: 'delete', key: app.id, purge, value: app }),
        putProvider: (value) => void changes.push({ kind: 'provider', op: 'put', value }),
      };
      const result = fn(w);
      if (changes.length === 0) return { result, event: null };
      const ack = await this.js.publish(registryState.subject, encode({ expected, changes } satisfies Entry), { timeout: 2_000 });
      await this.reached(ack.seq);
      const revision = this.accepted.get(ack.seq);
      if (revision !== undefined) return { result, event: { revision, changes: changes.map(publicChange) } };
    }
    throw new PierError('CONFLICT', 'registry: too many concurrent writes; retry');
  }

  async close(): Promise<void> {
    this.stopReading?.();
    for (const w of this.waiters.splice(0)) w.wake();
  }
}

import { traced } from '../../bus/trace.js';
import type { JetStreamClient, JetStreamManager } from 'nats';
import { appId } from '../../bus/ids.js';
import { uploadState } from '../../bus/subjects.js';
import { ReplicatedLog, type LogState } from '../../lib/state/replicated-log.js';
import { slotOf, type Upload, type UploadReader, type UploadStore, type UploadWriter } from './store.js';

type UploadChange = { op: 'put'; value: Upload } | { op: 'remove'; id: string };

/** `storage \0 user/app \0 target` → id of the unfinished upload to that target. */
const targetKey = (storage: string, user: string, app: string, target: string) => `${storage}\u0000${appId(user, app)}\u0000${target}`;
const keyOf = (u: Upload) => targetKey(u.storage ?? '', u.user, u.app, slotOf(u));

/** Every upload record of every storage, rebuilt by replaying the log (from its newest snapshot). */
class Model implements LogState<UploadChange> {
  revision = 0;
  readonly uploads = new Map<string, Upload>();
  readonly byTarget = new Map<string, string>();

  apply(changes: UploadChange[]): void {
    for (const c of changes) {
      if (c.op === 'put') this.put(c.value);
      else this.remove(c.id);
    }
    this.revision++;
  }

  /** As LMDB's store does: an active record becomes its target's unfinished upload, a done one stops being it. */
  private put(u: Upload): void {
    this.uploads.set(u.id, u);
    const key = keyOf(u);
    if (u.state === 'active') this.byTarget.set(key, u.id);
    else if (this.byTarget.get(key) === u.id) this.byTarget.delete(key);
  }

  private remove(id: string): void {
    const u = this.uploads.get(id);
    if (!u) return;
    this.uploads.delete(id);
    if (this.byTarget.get(keyOf(u)) === id) this.byTarget.delete(keyOf(u));
  }

  dump(): Upload[] {
    return [...this.uploads.values()];
  }

  load(dump: unknown, revision: number): void {
    for (const u of dump as Upload[]) this.put(u);
    this.revision = revision;
  }
}

/**
 * Upload records on JetStream (docs/operations.md "How writes stay correct"): one replicated log for every upload
 * replica, so records survive any one host and replicas sharing an upload root on several hosts
 * (shared storage) share its uploads. The bytes stay where the root is: each record names the
 * storage (upload root) it was created on, and a replica sees only the records of its own storage,
 * as a replica with LMDB sees only its host's.
 */
export class JetStreamUploadStore implements UploadStore {
  private constructor(
    private readonly log: ReplicatedLog<UploadChange, Model>,
    private readonly storage: string,
  ) {}

  static async open(js: JetStreamClient, manager: () => Promise<JetStreamManager>, options: { replicas: number; storage: string; snapshotEvery?: number; onError?: (err: unknown, what: string) => void }): Promise<JetStreamUploadStore> {
    const log = await ReplicatedLog.open(js, manager, uploadState, { ...options, recordKind: 'upload', fresh: () => new Model() });
    return new JetStreamUploadStore(log, options.storage);
  }

  private get model(): Model {
    return this.log.state;
  }

  private visible(u: Upload | undefined): Upload | undefined {
    return u !== undefined && u.storage === this.storage ? u : undefined;
  }

  async read<T>(fn: (r: UploadReader) => T): Promise<T> {
    await this.log.sync();
    return fn(this);
  }

  get(id: string): Upload | undefined {
    return this.visible(this.model.uploads.get(id));
  }

  all(): Upload[] {
    return [...this.model.uploads.values()].filter((u) => u.storage === this.storage);
  }

  unfinishedAt(user: string, app: string, target: string): Upload | undefined {
    const id = this.model.byTarget.get(targetKey(this.storage, user, app, target));
    return id === undefined ? undefined : this.get(id);
  }

  write<T>(fn: (w: UploadWriter) => T): Promise<T> {
    // A span of the request's trace while the record is durable on a quorum (docs/operations.md "Tracing").
    return traced('jetstream publish', 'internal', () => this.publish(fn), { 'db.system': 'nats-jetstream' });
  }

  private async publish<T>(fn: (w: UploadWriter) => T): Promise<T> {
    const { result } = await this.log.write((model) => {
      // This write's changes, by id (null: removed), read back by its own reads.
      const pending = new Map<string, Upload | null>();
      const read = (id: string) => (pending.has(id) ? (pending.get(id) ?? undefined) : this.visible(model.uploads.get(id)));
      /** The unfinished uploads of (user, app) by target, as they would be after this write. */
      const unfinished = (user: string, app: string) => {
        const prefix = targetKey(this.storage, user, app, '');
        const byTarget = new Map([...model.byTarget].filter(([k]) => k.startsWith(prefix)));
        for (const [id, u] of pending) {
          const before = model.uploads.get(id);
          if (before && byTarget.get(keyOf(before)) === id) byTarget.delete(keyOf(before));
          if (u && u.state === 'active' && keyOf(u).startsWith(prefix)) byTarget.set(keyOf(u), id);
        }
        return byTarget;
      };
      const w: UploadWriter = {
        get: read,
        unfinishedAt: (user, app, target) => {
          const id = unfinished(user, app).get(targetKey(this.storage, user, app, target));
          return id === undefined ? undefined : read(id);
        },
        countUnfinished: (user, app) => unfinished(user, app).size,
        put: (u) => void pending.set(u.id, { ...u, storage: this.storage }),
        remove: (u) => void pending.set(u.id, null),
      };
      const result = fn(w);
      const changes: UploadChange[] = [...pending].map(([id, u]) => (u ? { op: 'put', value: u } : { op: 'remove', id }));
      return { result, changes };
    });
    return result;
  }

  close(): Promise<void> {
    return this.log.close();
  }
}

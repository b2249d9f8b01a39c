import { traced } from '../../bus/trace.js';
import { open, type Database, type RootDatabase } from 'lmdb';
import { openRecords } from '../../lib/state/record-format.js';
import { durably } from '../../lib/state/lmdb-durable.js';
import { appId } from '../../bus/ids.js';
import type { CreateUpload, UploadRecord } from '../../bus/subjects.js';
import { settleLmdbFolder } from '../../lib/state/durable-files.js';

export interface UploadLock {
  /** busId of the upload replica holding the write session. */
  owner: string;
  session: string;
  /** Lease end (ms): a lock past it is free, whoever held it. */
  until: number;
}

/** An upload as the actor keeps it. `part` lives inside the app's `dest`, next to nothing else. */
export interface Upload extends CreateUpload {
  id: string;
  offset: number;
  target: string;
  part: string;
  state: 'active' | 'done';
  createdAt: number;
  updatedAt: number;
  lock: UploadLock | null;
  /** The upload root holding the bytes (PIER_STATE=jetstream: records are shared, bytes are not). */
  storage?: string;
}

/**
 * The slot an unfinished upload takes in the by-target index: its target, where a new POST of
 * section 7's protocol finds it to resume; a tus upload's own slot (`tus:<id>`, never an absolute
 * path, so never a target), counted against the cap but never found by target: every tus POST
 * creates an upload of its own. (One NUL per key: lmdb-js reads a key with two as an array, and a
 * range over the app's prefix then misses it.)
 */
export function slotOf(u: Upload): string {
  return u.protocol === 'tus' ? `tus:${u.id}` : u.target;
}

/** Whether `offset` completes the upload (a deferred length is never reached). */
export function completes(u: Upload, offset: number): boolean {
  return !u.lengthDeferred && offset === u.fileSize;
}

export function recordOf(u: Upload): UploadRecord {
  return { id: u.id, offset: u.offset, file_relative_path: u.relativePath, file_type: u.fileType, file_size: u.fileSize, storage_path: u.storagePath };
}

/**
 * What the upload actor keeps, whatever keeps it: the records, and an index of the unfinished
 * upload per (user, app, target) — how a client resumes with a new POST. Writes go through
 * `write`: everything inside commits together, so two POSTs racing for one target or the cap on
 * unfinished uploads hold across replicas.
 */
export interface UploadStore extends UploadReader {
  /**
   * Reads the latest state: caught up first with writes made through other replicas, as `write`
   * is (a no-op where the replicas share one environment). What an answer depends on is read so;
   * the plain readers above are this replica's view, possibly behind: for counters and sweeps.
   */
  read<T>(fn: (r: UploadReader) => T): Promise<T>;
  /**
   * `visibleOnly`: resolve once the write is committed and visible to every replica, without
   * waiting for it to reach the disk. Only for writes no answer depends on surviving an OS crash
   * (a lock taken or renewed: leases lapse, and the offset record that ends a PATCH is durable and
   * carries every earlier commit to the disk with it). Stores whose commits are durable when they
   * are visible (JetStream) ignore it.
   */
  write<T>(fn: (w: UploadWriter) => T, options?: { visibleOnly?: boolean }): Promise<T>;
  close(): Promise<void>;
}

/** What a read sees. */
export interface UploadReader {
  get(id: string): Upload | undefined;
  all(): Upload[];
  /** The unfinished upload of (user, app) to `target`, if any. */
  unfinishedAt(user: string, app: string, target: string): Upload | undefined;
}

/** What a write may do; its reads see the write's own changes. */
export interface UploadWriter {
  get(id: string): Upload | undefined;
  unfinishedAt(user: string, app: string, target: string): Upload | undefined;
  countUnfinished(user: string, app: string): number;
  /** Stores a record; an active one becomes its target's unfinished upload, a done one stops being it. */
  put(u: Upload): void;
  remove(u: Upload): void;
}

/** Uploads in LMDB (`<data>/uploads`), shared by the upload replicas of one host. */
export class LmdbUploadStore implements UploadStore {
  private constructor(
    private readonly root: RootDatabase,
    private readonly uploads: Database<Upload, string>,
    /** `user/app \0 target` → id of the active upload to that target. */
    private readonly byTarget: Database<string, string>,
  ) {}

  static open(path: string): LmdbUploadStore {
    const root = open({ path, compression: false });
    // The environment's folder and files, made by this open the first time, are on disk before any write is answered.
    settleLmdbFolder(path);
    return new LmdbUploadStore(root, openRecords<Upload>(root, 'uploads', 'upload'), root.openDB<string, string>({ name: 'by-target' }));
  }

  private static targetKey(user: string, app: string, target: string): string {
    return `${appId(user, app)}\u0000${target}`;
  }

  /** One environment shared by the replicas of a host (lmdb-js renews its read snapshot every turn of the event loop): nothing to catch up. */
  async read<T>(fn: (r: UploadReader) => T): Promise<T> {
    return fn(this);
  }

  get(id: string): Upload | undefined {
    return this.uploads.get(id);
  }

  all(): Upload[] {
    return [...this.uploads.getRange().map(({ value }) => value)];
  }

  unfinishedAt(user: string, app: string, target: string): Upload | undefined {
    const id = this.byTarget.get(LmdbUploadStore.targetKey(user, app, target));
    return id === undefined ? undefined : this.uploads.get(id);
  }

  write<T>(fn: (w: UploadWriter) => T, options: { visibleOnly?: boolean } = {}): Promise<T> {
    // A span of the request's trace while the record is durable (docs/operations.md "Tracing").
    return traced('lmdb commit', 'internal', () => this.commit(fn, options), { 'db.system': 'lmdb' });
  }

  private commit<T>(fn: (w: UploadWriter) => T, options: { visibleOnly?: boolean }): Promise<T> {
    const w: UploadWriter = {
      get: (id) => this.get(id),
      unfinishedAt: (user, app, target) => this.unfinishedAt(user, app, target),
      countUnfinished: (user, app) => {
        const prefix = LmdbUploadStore.targetKey(user, app, '');
        return this.byTarget.getKeysCount({ start: prefix, end: `${prefix}\uffff` });
      },
      put: (u) => {
        this.uploads.put(u.id, u);
        const key = LmdbUploadStore.targetKey(u.user, u.app, slotOf(u));
        if (u.state === 'active') this.byTarget.put(key, u.id);
        else if (this.byTarget.get(key) === u.id) this.byTarget.remove(key);
      },
      remove: (u) => {
        this.uploads.remove(u.id);
        const key = LmdbUploadStore.targetKey(u.user, u.app, slotOf(u));
        if (this.byTarget.get(key) === u.id) this.byTarget.remove(key);
      },
    };
    const committed = this.root.transaction(() => fn(w));
    return options.visibleOnly ? committed : durably(this.root, committed);
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}

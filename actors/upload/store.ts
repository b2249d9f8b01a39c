import { open, type Database, type RootDatabase } from 'lmdb';
import type { CreateUpload, UploadRecord } from '../../bus/subjects.js';
import { appId } from '../../bus/ids.js';

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
}

export function recordOf(u: Upload): UploadRecord {
  return { id: u.id, offset: u.offset, file_relative_path: u.relativePath, file_type: u.fileType, file_size: u.fileSize, storage_path: u.storagePath };
}

/** Uploads in LMDB (`<data>/uploads`), shared by the upload replicas of one host. */
export class UploadStore {
  private constructor(
    readonly root: RootDatabase,
    readonly uploads: Database<Upload, string>,
    /** `user/app \0 target` → id of the active upload to that target (how a client resumes with a new POST). */
    readonly byTarget: Database<string, string>,
  ) {}

  static open(path: string): UploadStore {
    const root = open({ path, compression: false });
    return new UploadStore(root, root.openDB<Upload, string>({ name: 'uploads' }), root.openDB<string, string>({ name: 'by-target' }));
  }

  static targetKey(user: string, app: string, target: string): string {
    return `${appId(user, app)}\u0000${target}`;
  }

  all(): Upload[] {
    return [...this.uploads.getRange().map(({ value }) => value)];
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}

import type { AuditEntry } from '../../bus/subjects.js';

/** Entries per batch, and the longest an entry waits for its batch. */
const BATCH_ENTRIES = 256;
const BATCH_MS = 20;

/**
 * Reads and refusals are audited in batches (one store transaction per 20 ms or 256 entries): a
 * write transaction per read would cost reads about 15 %. A crash loses at most that batch; what
 * changes a secret is audited inside its own write instead (VaultDeps.auditInWrite).
 */
export class AuditBatch {
  private pending: AuditEntry[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly append: (entries: AuditEntry[]) => Promise<unknown>) {}

  add(entry: AuditEntry): void {
    this.pending.push(entry);
    if (this.pending.length >= BATCH_ENTRIES) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), BATCH_MS);
  }

  /** Writes what is batched now (before answering the audit log, and at stop). */
  flush(): Promise<unknown> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    return this.append(batch);
  }
}

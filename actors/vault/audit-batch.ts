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
  /** What `prepare` made of each pending entry, in their order (when there is a `prepare`). */
  private prepared: unknown[] = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly append: (entries: AuditEntry[], prepared?: unknown[]) => Promise<unknown>,
    /**
     * Made of each entry as it is added, while what it holds was just made (VaultStore.prepareAudit:
     * LMDB encodes it then, not 20 ms later when nothing of it is in the CPU's caches any more).
     */
    private readonly prepare?: (entry: AuditEntry) => unknown,
  ) {}

  add(entry: AuditEntry): void {
    this.pending.push(entry);
    if (this.prepare) this.prepared.push(this.prepare(entry));
    if (this.pending.length >= BATCH_ENTRIES) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), BATCH_MS);
  }

  /** Writes what is batched now (before answering the audit log, and at stop). */
  flush(): Promise<unknown> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    const prepared = this.prepared;
    this.pending = [];
    this.prepared = [];
    return this.prepare ? this.append(batch, prepared) : this.append(batch);
  }
}

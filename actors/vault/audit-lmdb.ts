import type { Database, RootDatabase } from 'lmdb';
import { durably } from '../../lib/state/lmdb-durable.js';
import { AUDIT_SCAN_MAX, auditMatches, type AuditEntry, type AuditPage, type AuditQuery } from '../../bus/subjects.js';

/**
 * The vault's audit log in LMDB (docs/vault.md "Audit"). Entries are keyed `[ms, replica, seq]`, so
 * replicas sharing the environment never collide.
 */
export class LmdbAudit {
  private seq = 0;

  constructor(
    private readonly root: RootDatabase,
    private readonly db: Database<AuditEntry, [number, string, number]>,
    private readonly replica: string,
  ) {}

  /** One entry, in the write transaction under way: it commits with the change, or not at all. */
  put(entry: AuditEntry): void {
    void this.db.put(this.key(entry), entry);
  }

  /** Entries in one transaction of their own (reads and refusals are batched). */
  async append(entries: AuditEntry[]): Promise<void> {
    if (entries.length === 0) return;
    await durably(this.root, this.root.transaction(() => {
      for (const e of entries) this.db.put(this.key(e), e);
    }));
  }

  private key(entry: AuditEntry): [number, string, number] {
    return [Date.parse(entry.at), this.replica, this.seq++];
  }

  async read(q: AuditQuery, scanMax = AUDIT_SCAN_MAX): Promise<AuditPage> {
    const entries: AuditEntry[] = [];
    let scanned = 0;
    let searchedBackTo: string | null = null;
    for (const { value } of this.db.getRange({ reverse: true })) {
      if (scanned >= scanMax) return { entries, scanned, complete: false, searchedBackTo };
      scanned++;
      searchedBackTo = value.at;
      if (!auditMatches(q, value)) continue;
      entries.push(value);
      if (entries.length >= q.limit) break;
    }
    return { entries, scanned, complete: true, searchedBackTo };
  }

  /**
   * Retention: entries older than `before` (ms), then the oldest past `maxEntries`. Deletes in
   * transactions of a bounded size, so a large backlog never holds one huge write.
   */
  async prune(before: number, maxEntries: number): Promise<number> {
    let removed = 0;
    for (;;) {
      const old = [...this.db.getKeys({ end: [before], limit: 10_000 })];
      if (old.length === 0) break;
      await this.root.transaction(() => old.forEach((k) => this.db.remove(k)));
      removed += old.length;
    }
    const excess = this.db.getCount() - maxEntries;
    for (let left = excess; left > 0; ) {
      const oldest = [...this.db.getKeys({ limit: Math.min(left, 10_000) })];
      if (oldest.length === 0) break;
      await this.root.transaction(() => oldest.forEach((k) => this.db.remove(k)));
      removed += oldest.length;
      left -= oldest.length;
    }
    return removed;
  }
}

import { asBinary, type Database, type RootDatabase } from 'lmdb';
import { durably } from '../../lib/state/lmdb-durable.js';
import { AUDIT_SCAN_MAX, auditMatches, type AuditEntry, type AuditPage, type AuditQuery } from '../../bus/subjects.js';
import { AuditRecords } from './audit-record.js';

/**
 * The vault's audit log in LMDB (docs/vault.md "Audit"). Entries are keyed `[ms, replica, seq]`, so
 * replicas sharing the environment never collide.
 */
export class LmdbAudit {
  private seq = 0;
  /** The last entry's time and its milliseconds: entries of one millisecond share their `at` (handler.ts). */
  private lastAt = '';
  private lastMs = Number.NaN;
  private readonly records = new AuditRecords();

  constructor(
    private readonly root: RootDatabase,
    private readonly db: Database<AuditEntry, [number, string, number]>,
    private readonly replica: string,
  ) {}

  /** One entry, in the write transaction under way: it commits with the change, or not at all. */
  put(entry: AuditEntry): void {
    this.write(entry, this.records.of(entry));
  }

  /**
   * Entries in one transaction of their own (reads and refusals are batched); `prepared`, when
   * given: `prepare`'s answer for each, in the same order.
   */
  async append(entries: AuditEntry[], prepared?: ReadonlyArray<Buffer | undefined>): Promise<void> {
    if (entries.length === 0) return;
    await durably(this.root, this.root.transaction(() => {
      for (let i = 0; i < entries.length; i++) this.write(entries[i], prepared ? prepared[i] : this.records.of(entries[i]));
    }));
  }

  /** An entry's stored bytes, made now (audit-record.ts): undefined when lmdb-js's msgpackr is to make them. */
  prepare(entry: AuditEntry): Buffer | undefined {
    return this.records.of(entry);
  }

  /** `bytes`: the entry as msgpackr would write it (audit-record.ts), or undefined for msgpackr to write it. */
  private write(entry: AuditEntry, bytes: Buffer | undefined): void {
    void this.db.put(this.key(entry), bytes ? (asBinary(bytes) as unknown as AuditEntry) : entry);
  }

  private key(entry: AuditEntry): [number, string, number] {
    if (entry.at !== this.lastAt) {
      this.lastMs = Date.parse(entry.at);
      this.lastAt = entry.at;
    }
    return [this.lastMs, this.replica, this.seq++];
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

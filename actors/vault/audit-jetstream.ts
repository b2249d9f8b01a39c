import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from 'nats';
import { randomBytes } from 'node:crypto';
import { auditMatches, vaultState, type AuditEntry, type AuditPage, type AuditQuery } from '../../bus/subjects.js';
import { readBatch, recordBytes } from '../../lib/state/record-format.js';
import { ensureStream, retryWhileStarting } from '../../lib/state/jetstream.js';
import { GroupCommit } from '../../lib/state/group-commit.js';
import { ENV } from '../../lib/config/config-env.js';

/** Audit entries per stream message (at most; ~250 bytes each). */
const AUDIT_BATCH = 256;
/** Entries of one group commit at most (its messages are pipelined: one round trip). */
const GROUP_ENTRIES = 4 * AUDIT_BATCH;

/**
 * The entries of one audit message: a batch, or one entry as written before batches (none when it
 * is not ours). An entry of a later format is refused by name (record-format.ts), not left out of a
 * search in silence.
 */
function auditEntriesOf(data: Uint8Array, seq: number): AuditEntry[] {
  return readBatch<AuditEntry>('audit', data, `the vault audit stream at ${seq}`);
}

/** The vault's audit on JetStream: a stream with retention (max age, max entries), written in batches. */
export class JetStreamAudit {
  constructor(
    private readonly js: JetStreamClient,
    private readonly manager: JetStreamManager,
  ) {}

  /** Makes the stream, or gives it this replica's retention: the operator's to change between starts, the newest replica's settings win. */
  async ensure(replicas: number, maxAgeMs: number, maxEntries: number): Promise<void> {
    await ensureStream(
      this.manager,
      {
        name: vaultState.auditStream,
        subjects: [vaultState.auditSubject],
        num_replicas: replicas,
        max_age: maxAgeMs * 1_000_000,
        // Messages are batches of entries: the entry limit bounds both the messages and the bytes
        // (about 250 bytes an entry, so at most about twice the entries LMDB would keep).
        max_msgs: maxEntries,
        max_bytes: maxEntries * 512,
      },
      'update',
      ENV.auditMaxEntries,
    );
  }

  /**
   * Appends entries in batches: one stream message per AUDIT_BATCH entries (the vault audits reads
   * in batches every 20 ms), so the audit costs a quorum write per batch, not per read. Writes'
   * entries, each write's appended before it is answered, are group-committed (group-commit.ts):
   * the entries of the writes that came while one message was being written go in the next
   * message together, so concurrent writes share a quorum write (and its fsyncs) instead of paying
   * one each (docs/performance.md "Group commit").
   */
  private readonly group = new GroupCommit<AuditEntry>((entries) => this.publish(entries), GROUP_ENTRIES);

  append(entries: AuditEntry[]): Promise<void> {
    return this.group.add(entries);
  }

  /** One id per message: a retry of a publish whose answer was lost is dropped by the stream's duplicate window. */
  private async publish(entries: AuditEntry[]): Promise<void> {
    const batches: AuditEntry[][] = [];
    for (let i = 0; i < entries.length; i += AUDIT_BATCH) batches.push(entries.slice(i, i + AUDIT_BATCH));
    // Pipelined on one connection: appended in order, one round trip in all.
    await Promise.all(
      batches.map((batch) => {
        const msgID = randomBytes(12).toString('base64url');
        return retryWhileStarting(() => this.js.publish(vaultState.auditSubject, recordBytes('audit', batch), { timeout: 2_000, msgID }));
      }),
    );
  }

  /** Newest first, at most `q.limit` matches, searched back through at most `scanMax` entries: read in windows backwards from the stream's end. */
  async read(q: AuditQuery, scanMax: number): Promise<AuditPage> {
    const info = await this.manager.streams.info(vaultState.auditStream);
    const out: AuditEntry[] = [];
    let scanned = 0;
    let searchedBackTo: string | null = null;
    const first = info.state.first_seq;
    // Read in windows from the end: ordered consumers only read forwards.
    for (let end = info.state.last_seq; end >= first && out.length < q.limit; ) {
      const start = Math.max(first, end - Math.max(q.limit, 256) + 1);
      const consumer = await this.js.consumers.get(vaultState.auditStream, { opt_start_seq: start, deliver_policy: DeliverPolicy.StartSequence });
      const batch: AuditEntry[] = [];
      const messages = await consumer.fetch({ max_messages: end - start + 1, expires: 2_000 });
      for await (const m of messages) {
        if (m.seq > end) break;
        batch.push(...auditEntriesOf(m.data, m.seq));
        if (m.seq === end) break;
      }
      for (const e of batch.reverse()) {
        if (scanned >= scanMax) return { entries: out, scanned, complete: false, searchedBackTo };
        scanned++;
        searchedBackTo = e.at;
        if (!auditMatches(q, e)) continue;
        out.push(e);
        if (out.length >= q.limit) break;
      }
      end = start - 1;
    }
    return { entries: out, scanned, complete: true, searchedBackTo };
  }
}

import type { JetStreamClient, JetStreamManager } from 'nats';
import { PierError } from '../../bus/errors.js';
import { jsError, jsNoMessage } from './jetstream.js';
import { readRecord, recordBytes, type RecordKind } from './record-format.js';


/** Where a log lives: its stream and subject, and the stream of its snapshots. */
export interface LogNames {
  stream: string;
  subject: string;
  snapshotStream: string;
  /** Snapshot parts go to `<prefix>.part`, the record naming them to `<prefix>.done`. */
  snapshotPrefix: string;
}

/** A snapshot as stored: the log sequence and revision it covers, and the stream sequences of its parts. */
interface SnapshotRecord {
  seq: number;
  revision: number;
  parts: number[];
}

/** At most this many parts to a snapshot (1 GiB of state): a record naming more is not one of ours. */
const MAX_PARTS = 4_096;

/** Far below NATS's default max payload (1 MiB), whatever the server was given. */
const PART_BYTES = 256 * 1024;

function isSnapshotRecord(r: unknown): r is SnapshotRecord {
  const x = r as SnapshotRecord;
  const seq = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;
  return typeof x === 'object' && x !== null && seq(x.seq) && seq(x.revision) && Array.isArray(x.parts) && x.parts.length > 0 && x.parts.length <= MAX_PARTS && x.parts.every(seq);
}

/**
 * A replicated log's snapshots (see ReplicatedLog): the whole state at one log sequence, in parts
 * on a stream of their own, and a record naming the parts. The newest record is the one a replica
 * opens from; writing one purges the log below the *previous* snapshot, so a replica less than one
 * interval behind keeps reading the log.
 */
export class LogSnapshots {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: LogNames,
    /** What the state in a snapshot is (the log's own kind), for the format check of its dump. */
    private readonly dumpKind: RecordKind,
  ) {}

  /** Where a snapshot is, in a refusal of one of a later format. */
  private get where(): string {
    return `the newest snapshot of ${this.names.stream}`;
  }

  /** The newest snapshot and the state it holds (null: none yet). */
  async newest(): Promise<(SnapshotRecord & { dump: unknown }) | null> {
    // Its parts may be purged by a newer snapshot while they are read: then read the newer one.
    for (let attempt = 0; ; attempt++) {
      const record = await this.newestRecord();
      if (!record) return null;
      // Read from the bus like any message: its shape is checked and its size bounded before use.
      if (!isSnapshotRecord(record)) throw new PierError('INTERNAL', `${this.names.snapshotStream}: the newest snapshot record is not one (remove it with nats stream rmm, the one before serves)`);
      try {
        const parts = await Promise.all(record.parts.map((seq) => this.jsm.streams.getMessage(this.names.snapshotStream, { seq }).then((m) => m.data)));
        return { ...record, dump: readRecord(this.dumpKind, Buffer.concat(parts), this.where) };
      } catch (err) {
        if (!jsNoMessage(err) || attempt >= 5) throw err;
      }
    }
  }

  private async newestRecord(): Promise<SnapshotRecord | null> {
    return (await this.newestDone())?.record ?? null;
  }

  /** The newest record and its sequence on the snapshot stream (the fence of the next one). */
  private async newestDone(): Promise<{ record: SnapshotRecord; streamSeq: number } | null> {
    try {
      const m = await this.jsm.streams.getMessage(this.names.snapshotStream, { last_by_subj: `${this.names.snapshotPrefix}.done` });
      return { record: readRecord<SnapshotRecord>('snapshot', m.data, this.where), streamSeq: m.seq };
    } catch (err) {
      if (jsNoMessage(err)) return null;
      throw err;
    }
  }

  /**
   * Writes `bytes` (the state dumped at `at`) as the newest snapshot, unless one covering as much
   * is there already; then purges what no replica needs any more. Answers whether it wrote.
   */
  async write(at: { seq: number; revision: number }, bytes: Uint8Array): Promise<boolean> {
    const previous = await this.newestRecord();
    if (previous && previous.seq >= at.seq) return false; // a newer one is there already
    if (bytes.byteLength > MAX_PARTS * PART_BYTES) throw new Error(`${this.names.stream}: the state (${bytes.byteLength} bytes) is past the largest snapshot; the log is not compacted`);
    const parts: number[] = [];
    for (let from = 0; from < bytes.byteLength || parts.length === 0; from += PART_BYTES) {
      parts.push((await this.js.publish(`${this.names.snapshotPrefix}.part`, bytes.subarray(from, from + PART_BYTES), { timeout: 5_000 })).seq);
    }
    // Another replica's snapshot covering more may have landed meanwhile: the newest record must stay
    // the newest state. The check alone is not enough (another record may land between it and the
    // publish, and would then be followed by this older one): the record is published only if the
    // record checked is still the last one (the server's expected last sequence on the subject).
    const latest = await this.newestDone();
    if (latest && latest.record.seq >= at.seq) return false;
    try {
      await this.js.publish(`${this.names.snapshotPrefix}.done`, recordBytes('snapshot', { ...at, parts } satisfies SnapshotRecord), { timeout: 5_000, expect: { lastSubjectSequence: latest?.streamSeq ?? 0 } });
    } catch (err) {
      if (jsError(err) === 'wrong-last-sequence') return false; // another record landed first: it stands
      throw err;
    }
    if (previous && isSnapshotRecord(previous)) {
      // The log below the previous snapshot is needed by nobody: a replica that far behind reloads.
      // Snapshots older than the previous go too; the previous stays for a replica reading it now.
      await this.purgeBelow(this.names.stream, previous.seq + 1);
      await this.purgeBelow(this.names.snapshotStream, Math.min(...previous.parts));
    }
    return true;
  }

  /** Removes a stream's messages below `seq`. (nats-server 2.9 takes a purge "below 1" as "everything".) */
  private async purgeBelow(stream: string, seq: number): Promise<void> {
    if (seq > 1) await this.jsm.streams.purge(stream, { seq });
  }
}

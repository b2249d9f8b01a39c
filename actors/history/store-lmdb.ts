import { randomBytes } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import { durably } from '../../lib/state/lmdb-durable.js';
import { openPrivate } from '../../lib/state/lmdb-private.js';
import { openRecords } from '../../lib/state/record-format.js';
import type { HistorySeal } from './seal.js';
import { chainKey, epochOf, sealBound, type HistoryBounds, type HistoryChain, type HistoryHead, type HistoryStore, type Kept, type KeptEntry } from './store.js';

interface Entry {
  prev: number;
  at: number;
  bytes: number;
  /** Sealed text; absent for a hole (a message too large to keep). */
  box?: Uint8Array;
}

interface Head {
  last: number;
  /** Entries kept, and their bytes: the bounds are applied as each message is kept. */
  count: number;
  bytes: number;
}

interface Meta {
  /** Names this store: a fresh store (its file lost) is a new epoch. */
  epoch: string;
  seq: number;
}

/**
 * The history in one process (the in-process bus): an LMDB environment in the data dir. Every
 * append is one write transaction, so the chain's order is the order appends commit in; the
 * bounds (messages, bytes, age) are applied in the same transaction, oldest first.
 */
export class LmdbHistory implements HistoryStore {
  readonly kind = 'lmdb' as const;
  private sweeper: NodeJS.Timeout;

  private constructor(
    private readonly root: RootDatabase,
    private readonly entries: Database<Entry, [string, number]>,
    private readonly heads: Database<Head, string>,
    private readonly meta: Database<Meta, string>,
    private readonly seal: HistorySeal,
    private readonly epoch: string,
    private readonly ceilingTtlMs: number,
  ) {
    // Age is the one bound nothing else enforces on a quiet chain: swept once a minute.
    this.sweeper = setInterval(() => void this.sweep().catch(() => undefined), 60_000);
    this.sweeper.unref();
  }

  static async open(path: string, seal: HistorySeal, ceilingTtlMs: number): Promise<LmdbHistory> {
    // Opened after the data dir's modes are made private at start: private by itself.
    const root = openPrivate(path, { compression: false });
    const entries = openRecords<Entry, [string, number]>(root, 'entries', 'gatewayHistory');
    const heads = openRecords<Head, string>(root, 'heads', 'gatewayHistory');
    const meta = openRecords<Meta, string>(root, 'meta', 'gatewayHistory');
    let m = meta.get('store');
    if (!m) {
      m = { epoch: `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`, seq: 0 };
      await durably(root, meta.put('store', m));
    }
    return new LmdbHistory(root, entries, heads, meta, seal, m.epoch, ceilingTtlMs);
  }

  async head(chain: HistoryChain): Promise<HistoryHead> {
    return { epoch: epochOf(this.epoch, chain), last: this.heads.get(chainKey(chain))?.last ?? 0 };
  }

  async append(chain: HistoryChain, text: string | null, bytes: number, bounds: HistoryBounds): Promise<Kept> {
    const key = chainKey(chain);
    const kept = await durably(
      this.root,
      this.root.transaction(() => {
        const m = this.meta.get('store')!;
        const seq = m.seq + 1;
        const head = this.heads.get(key) ?? { last: 0, count: 0, bytes: 0 };
        const prev = head.last;
        const entry: Entry = { prev, at: Date.now(), bytes, ...(text === null ? {} : { box: this.seal.seal(text, sealBound(chain, prev)) }) };
        this.entries.put([key, seq], entry);
        const next = this.trimmed(key, { last: seq, count: head.count + 1, bytes: head.bytes + bytes }, bounds);
        this.heads.put(key, next);
        this.meta.put('store', { ...m, seq });
        return { epoch: epochOf(this.epoch, chain), seq, prev };
      }),
    );
    return kept;
  }

  /** Drops the oldest entries of a chain past its bounds (inside the caller's transaction). */
  private trimmed(key: string, head: Head, bounds: HistoryBounds): Head {
    const tooOld = Date.now() - bounds.ttlMs;
    let { count, bytes } = head;
    for (const { key: k, value } of this.entries.getRange({ start: [key, 0], end: [key, Number.MAX_SAFE_INTEGER] })) {
      if (count <= bounds.messages && bytes <= bounds.bytes && value.at >= tooOld) break;
      if (k[1] === head.last) break; // the message just kept stays, whatever its size
      this.entries.remove(k);
      count--;
      bytes -= value.bytes;
    }
    return { last: head.last, count, bytes };
  }

  async after(chain: HistoryChain, after: number, limit: number, maxBytes = Infinity): Promise<KeptEntry[]> {
    const key = chainKey(chain);
    const out: KeptEntry[] = [];
    let read = 0;
    for (const { key: k, value } of this.entries.getRange({ start: [key, after + 1], end: [key, Number.MAX_SAFE_INTEGER], limit })) {
      const seq = k[1];
      read += value.bytes;
      if (read > maxBytes) {
        out.push({ seq, prev: value.prev, at: value.at, bytes: value.bytes, text: null });
        break;
      }
      const text = value.box === undefined ? null : this.seal.open(value.box, sealBound(chain, value.prev));
      // A box that does not open (the key changed, damage) is a hole: the reader cannot recover across it.
      out.push({ seq, prev: value.prev, at: value.at, bytes: value.bytes, text });
    }
    return out;
  }

  async at(chain: HistoryChain, seq: number): Promise<{ at: number } | null> {
    const e = this.entries.get([chainKey(chain), seq]);
    return e ? { at: e.at } : null;
  }

  async drop(user: string, app: string): Promise<void> {
    const prefix = `${user}.${app}.`;
    await durably(
      this.root,
      this.root.transaction(() => {
        for (const key of this.heads.getKeys({ start: prefix, end: `${prefix}\uffff` })) {
          for (const k of this.entries.getKeys({ start: [key, 0], end: [key, Number.MAX_SAFE_INTEGER] })) this.entries.remove(k);
          this.heads.remove(key);
        }
      }),
    );
  }

  /** Removes entries older than the ceiling's age from every chain. */
  private async sweep(): Promise<void> {
    const tooOld = Date.now() - this.ceilingTtlMs;
    await this.root.transaction(() => {
      for (const { key, value: head } of this.heads.getRange({})) {
        let { count, bytes } = head;
        for (const { key: k, value } of this.entries.getRange({ start: [key, 0], end: [key, Number.MAX_SAFE_INTEGER] })) {
          if (value.at >= tooOld || k[1] === head.last) break;
          this.entries.remove(k);
          count--;
          bytes -= value.bytes;
        }
        if (count !== head.count) this.heads.put(key, { ...head, count, bytes });
      }
    });
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.root.close();
  }
}

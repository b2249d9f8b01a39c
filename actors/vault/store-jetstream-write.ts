import { PierError } from '../../bus/errors.js';
import type { AuditEntry, WrittenMark } from '../../bus/subjects.js';
import { Conflict, type BucketView } from './bucket-view.js';
import { bufferedWriter, type Op, type VaultViews } from './buffered-writer.js';
import type { VaultStore, VaultWriter } from './store.js';
import { MARKED, type WrittenMarks } from './store-jetstream-sync.js';
import { backOff, commitWaves, oneChangePerKey, putBack, type Committed } from './write-attempt.js';
import { dropStrayValueKeys, erasingUnusedValueKeys, secretSealedUnder, type StrayValueKey } from './value-key-erasure.js';

/** What a write on the JetStream store (store-jetstream.ts) uses. */
export interface JetStreamWriteParts {
  views: VaultViews;
  marks: WrittenMarks;
  /** Tells the other replicas where their views must be to show a change just made durable; the answer waits for it. */
  announce: ((mark: WrittenMark) => void | Promise<void>) | undefined;
  appendAudit: (entries: AuditEntry[]) => Promise<void>;
  /** Audit entries of a durable change that could not be appended within the retry period. */
  onAuditLost: (count: number) => void;
  onEraseFailed: (err: unknown) => void;
  onPutBackFailed: (err: unknown) => void;
  /** The store's own write: the erasure of stray value keys is one. */
  store: Pick<VaultStore, 'write'>;
}

/**
 * `attempts`, and afterwards (whatever it answered) the value keys committed by attempts that did
 * not land: a write commits change by change, so an attempt that lost to another replica's may
 * have committed a new value's key, and its sealed record was written to the stream and refused
 * there. That key names nothing accepted: it is erased (value-key-erasure.ts dropStrayValueKeys),
 * or the refused copy would stay readable after its value (sealed anew by the retry) is destroyed.
 */
export async function publish<T>(p: JetStreamWriteParts, fn: (w: VaultWriter) => T): Promise<T> {
  const stray: StrayValueKey[] = [];
  try {
    return await attempts(p, fn, stray);
  } finally {
    if (stray.length > 0) await dropStrayValueKeys(p.store, stray).catch((err: unknown) => p.onEraseFailed(err));
  }
}

async function attempts<T>(p: JetStreamWriteParts, fn: (w: VaultWriter) => T, stray: StrayValueKey[]): Promise<T> {
  const { marks } = p;
  for (let attempt = 0; ; attempt++) {
    const ops: Op[] = [];
    const audit: AuditEntry[] = [];
    const result = erasingUnusedValueKeys(fn)(bufferedWriter(p.views, ops, audit));
    const mark: Required<WrittenMark> = { keys: 0, secrets: 0, versions: 0, deleted: 0, valueKeys: 0 };
    /** Data keys, versions and deleted secrets removed by this write: their earlier entries are erased once it is durable. */
    const erase: Array<{ view: BucketView<unknown>; key: string; seq: number }> = [];
    /** Value keys this attempt committed: stray if it does not land. */
    const keysPut: StrayValueKey[] = [];
    /** What this attempt committed: put back if it loses (write-attempt.ts). */
    const committed: Committed[] = [];
    const isValueKeyPut = (c: Committed) => c.op.view === marks.viewOf('valueKeys') && c.op.value !== undefined;
    const record = (op: Op, seq: number) => {
      const { view, key, value, expected } = op;
      committed.push({ op, seq });
      if (view === marks.viewOf('valueKeys') && value !== undefined) keysPut.push({ id: key, secret: secretSealedUnder(ops, key) });
      const k = MARKED.find((name) => marks.viewOf(name) === view)!;
      mark[k] = Math.max(mark[k], seq);
      // (A secret's own earlier records go with `scrub`'s margin, or at once under a purge: eraseRemoved.)
      if (value === undefined && seq > 0 && view !== marks.viewOf('secrets')) erase.push({ view, key, seq });
      // A kept version written again (sealed anew by a rekey, or imported over): its earlier value leaves the stream.
      else if (value !== undefined && expected > 0 && view === marks.viewOf('versions')) erase.push({ view, key, seq });
    };
    try {
      // Committed in the order `fn` made them, a wave at a time (write-attempt.ts commitWaves): a
      // version is kept, and a value key is there, before the secret moves past it.
      for (const wave of commitWaves(oneChangePerKey(ops), { versions: marks.viewOf('versions'), valueKeys: marks.viewOf('valueKeys') })) {
        // A held change (a value key reserved ahead) is durable already, at the revision it was read at.
        const landed = await Promise.allSettled(wave.map((op) => (op.held ? Promise.resolve(op.expected) : op.view.commit(op.key, op.value, op.expected))));
        // What landed is recorded before a failure is thrown: an attempt that lost puts it back.
        wave.forEach((op, i) => {
          const r = landed[i]!;
          if (r.status === 'fulfilled') record(op, r.value);
        });
        // A conflict only when every failure is one; the store out of reach otherwise (503).
        const failures = landed.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
        if (failures.length > 0) throw failures.find((e) => !(e instanceof Conflict)) ?? failures[0];
      }
    } catch (err) {
      stray.push(...keysPut);
      // The stream out of reach (a node lost, a leader being elected): the write may or may not
      // have landed; the caller is told to try again (503), not that Pier broke (500).
      if (!(err instanceof Conflict)) throw err instanceof PierError ? err : new PierError('UNAVAILABLE', 'the vault store did not answer in time; try again', { cause: err });
      // What it committed goes back first (a new value key is a stray: erased, not put back), so
      // the next attempt, and any other writer, sees none of this one.
      await putBack(committed, isValueKeyPut, (e) => p.onPutBackFailed(e));
      if (attempt >= 20) throw new PierError('CONFLICT', 'too many concurrent writes of the same secret; retry');
      // Two writes that each put back half of what they did would meet again in step: one waits a little.
      if (committed.some((c) => c.seq > 0)) await backOff(attempt);
      // Another replica wrote first: see what it wrote, then decide again.
      continue;
    }
    // The change is durable now: the other replicas hear where to read it from before the client
    // is answered. Its audit entries are durable before the answer too (docs/vault.md "Audit": a
    // change's entry is never lost to a power cut), retried across a leader election of the audit
    // stream; one that still cannot be written is counted and logged, and the write, which
    // happened, is answered as done rather than failed.
    if (ops.length > 0 && p.announce) {
      marks.heard(mark);
      await p.announce(mark);
    }
    // Destroyed means unreadable with the master key in hand: the removed entries' bytes leave the
    // stream too, before the answer. Keys first (data keys, value keys): once they are gone nothing
    // left of the rest opens, should the erasure be cut short. Each key's entries are walked in
    // order, the keys at once, and the audit meanwhile: none waits for another.
    const erasing = (which: typeof erase) => Promise.all(which.map((e) => e.view.eraseBefore(e.key, e.seq).catch((err: unknown) => p.onEraseFailed(err))));
    const isKey = (e: (typeof erase)[number]) => e.view === marks.viewOf('keys') || e.view === marks.viewOf('valueKeys');
    await Promise.all([
      audit.length > 0 ? p.appendAudit(audit).catch(() => p.onAuditLost(audit.length)) : undefined,
      erasing(erase.filter(isKey)).then(() => erasing(erase.filter((e) => !isKey(e)))),
    ]);
    return result;
  }
}

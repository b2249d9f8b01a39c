/**
 * Group commit (docs/performance.md "Group commit"): what callers add while a commit is in flight
 * waits for it to end, then goes in one commit with everything else added meanwhile, in the order it
 * was added. Each caller is answered when the commit holding its items is done (or failed: each
 * caller of that commit gets its error). A commit that waits for a disk or a quorum then costs one
 * sync for many callers instead of one each, and no caller waits longer than the commit before its
 * own and its own.
 *
 * What waits is bounded by the callers (each caller waits for its answer before it adds more, and
 * the callers are bounded where they come from); `maxItems` bounds one commit, the rest going in
 * the next.
 */
export class GroupCommit<T> {
  private waiting: Array<{ items: T[]; done: (err?: unknown) => void }> = [];
  /** A commit is being made (the loop in `next` takes what waits once it is done). */
  private committing = false;

  constructor(
    private readonly commit: (items: T[]) => Promise<void>,
    private readonly maxItems = Number.POSITIVE_INFINITY,
  ) {}

  /** Resolves once `items` are committed (with whatever else came meanwhile). */
  add(items: T[]): Promise<void> {
    if (items.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ items, done: (err) => (err === undefined ? resolve() : reject(err)) });
      if (!this.committing) void this.next();
    });
  }

  private async next(): Promise<void> {
    this.committing = true;
    while (this.waiting.length > 0) {
      // Whole callers only: one caller's items are never split across two commits.
      const taken: typeof this.waiting = [];
      let count = 0;
      while (this.waiting.length > 0 && (taken.length === 0 || count + this.waiting[0]!.items.length <= this.maxItems)) {
        const w = this.waiting.shift()!;
        taken.push(w);
        count += w.items.length;
      }
      let failure: unknown;
      try {
        await this.commit(taken.flatMap((w) => w.items));
      } catch (err) {
        failure = err ?? new Error('group commit failed');
      }
      for (const w of taken) w.done(failure);
    }
    this.committing = false;
  }
}

import type { JetStreamManager } from 'nats';
import { PierError } from '../../bus/errors.js';
import { catchUpOrRefuse, SharedCatchUp, withinBudget } from '../../lib/state/jetstream.js';
import { vaultState, type WrittenMark } from '../../bus/subjects.js';
import type { BucketView } from './bucket-view.js';
import type { VaultViews } from './buffered-writer.js';

/** The buckets a writer's mark names, in the order they are caught up with. */
export const MARKED = ['keys', 'secrets', 'versions', 'deleted', 'valueKeys'] as const;
export type Marked = (typeof MARKED)[number];

/** The longest a read waits for this replica's views to show the writes it heard of, before a 503. */
const READ_BUDGET_MS = 1_000;

/**
 * Where a JetStream vault replica's views must be before a read (store-jetstream.ts `sync`): the
 * marks heard from writers (docs/operations.md "How writes stay correct"), or, without
 * announcements and after a lost connection, where the streams end.
 */
export class WrittenMarks {
  /** The highest marks heard from writers (this replica's own included): reads wait for the views to reach them. */
  private readonly wanted: Required<WrittenMark> = { keys: 0, secrets: 0, versions: 0, deleted: 0, valueKeys: 0 };

  /** The connection losses a catch-up with the streams has covered (reads after a newer one catch up first). */
  private caughtUpAfterLosses: number;

  constructor(
    private readonly manager: JetStreamManager,
    private readonly views: VaultViews,
    /** Whether writers announce their marks (JetStreamVaultOptions.announce). */
    private readonly announced: boolean,
    private readonly connectionLosses: () => number,
  ) {
    // The views start from the streams' ends as they are when the store opens.
    this.caughtUpAfterLosses = connectionLosses();
  }

  /** Each bucket's view, by the name its mark goes by. */
  viewOf(k: Marked): BucketView<unknown> {
    return this.views[k] as BucketView<unknown>;
  }

  /** A write made durable (by another replica, or this one): reads from now on show it (a 0.2 replica's mark names the first two buckets only). */
  heard(mark: WrittenMark): void {
    for (const k of MARKED) this.wanted[k] = Math.max(this.wanted[k], mark[k] ?? 0);
  }

  /**
   * The views brought to the streams' ends as they are now, or the read refused (503): what reads
   * do without announcements, and after a lost connection (announcements may have been missed).
   */
  readonly catchUp = new SharedCatchUp(() =>
    catchUpOrRefuse(
      async () => (await Promise.all(MARKED.map((k) => this.manager.streams.info(`KV_${vaultState[k]}`)))).map((i) => i.state.last_seq),
      MARKED.map((k) => this.viewOf(k).applied),
      'the vault streams',
    ),
  );

  /**
   * Makes the views show every write answered so far, wherever it was made. With announcements
   * (`announce`/`heard`: each writer tells every replica its marks before it answers), that is a
   * local check, waiting only when a view is behind a heard mark (at most 1 s, e.g. while its follow
   * re-attaches after a node loss). Without them, one stream-info round trip (concurrent callers share it).
   */
  sync(): Promise<void> {
    if (!this.announced) return this.catchUp.run();
    const losses = this.connectionLosses();
    if (losses !== this.caughtUpAfterLosses) {
      // Away from the bus since the last catch-up: announcements may be lost. The streams say where
      // the views must be (refused, 503, if they cannot get there within the budget).
      return this.catchUp
        .run()
        .then(() => {
          this.caughtUpAfterLosses = Math.max(this.caughtUpAfterLosses, losses);
          return this.sync();
        });
    }
    const lagging = () => MARKED.filter((k) => this.viewOf(k).applied.value < this.wanted[k]);
    if (lagging().length === 0) return Promise.resolve();
    // Waited for within one budget, the marks read again each time the view reaches them: under a
    // stream of writes a newer mark is heard while the view catches up with the last, and refusing
    // then (it did, in an upgrade run) answers 503 to a read the view would serve a moment later.
    const deadline = Date.now() + READ_BUDGET_MS;
    const caughtUp = async (): Promise<void> => {
      for (let behind = lagging(); behind.length > 0 && Date.now() < deadline; behind = lagging()) {
        await withinBudget(Promise.all(behind.map((k) => this.viewOf(k).applied.reached(this.wanted[k]))), deadline - Date.now());
      }
    };
    return caughtUp().then(async () => {
      if (lagging().length === 0) return;
      // Still behind after the budget (its follow re-attaching after a node loss). A mark past the
      // end of its stream was never written (a forged one, or a stream reset): it is forgotten, so
      // it costs one wait, not one per read. A real one is kept, and the read is refused (503)
      // rather than answered from a view that may be missing an acknowledged write.
      for (const k of lagging()) {
        const end = await this.viewOf(k).streamEnd();
        if (end !== null && this.wanted[k] > end) this.wanted[k] = this.viewOf(k).applied.value;
      }
      if (lagging().length > 0) throw new PierError('UNAVAILABLE', 'this vault replica is catching up with a recent change; try again');
    });
  }
}

import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { PierError } from '../../bus/errors.js';

/**
 * bcrypt comparisons in worker threads. At cost 10 one takes ~55 ms of CPU: on the event loop a
 * flood of them would stall every other request. The queue is bounded: past it, callers get a 503
 * at once instead of waiting behind thousands of hashes.
 */
export class BcryptPool {
  private readonly pool: Piscina;

  constructor(
    threads = availableParallelism(),
    private readonly maxQueue = 256,
  ) {
    this.pool = new Piscina({
      filename: new URL('./bcrypt-worker.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: threads,
      maxQueue,
      idleTimeout: 60_000,
    });
  }

  async compare(plain: string, hash: string): Promise<boolean> {
    // Checked here rather than by piscina's refusal, which says so only in its text: the queue
    // grows only through this call, on this thread, so the check is exact.
    if (this.pool.queueSize >= this.maxQueue) throw new PierError('UNAVAILABLE', 'too many token requests in progress; retry shortly');
    return (await this.pool.run({ plain, hash })) as boolean;
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

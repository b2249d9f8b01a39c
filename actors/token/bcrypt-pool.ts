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

  constructor(threads = availableParallelism(), maxQueue = 256) {
    this.pool = new Piscina({
      filename: new URL('./bcrypt-worker.js', import.meta.url).href,
      minThreads: 1,
      maxThreads: threads,
      maxQueue,
      idleTimeout: 60_000,
    });
  }

  async compare(plain: string, hash: string): Promise<boolean> {
    try {
      return (await this.pool.run({ plain, hash })) as boolean;
    } catch (err) {
      if (/queue is at limit/i.test((err as Error).message)) throw new PierError('UNAVAILABLE', 'too many token requests in progress; retry shortly', { cause: err });
      throw err;
    }
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

import { PierError } from '../../bus/errors.js';

/**
 * How far a local copy of a stream has got (the last stream sequence it applied), and who waits
 * for it to get further: a writer waiting for its own entry to come back, a read catching up with
 * the stream's end. Every wait has a deadline, and a wait given up on leaves the list, so a copy
 * that stays stuck does not collect one waiter per request.
 */
export class AppliedSequence {
  private at = 0;
  private readonly waiters: Array<{ seq: number; wake: () => void; refuse: (err: Error) => void }> = [];
  /** Why the copy cannot get further (an entry it cannot read): every wait past `at` is refused with it. */
  private stuck: Error | null = null;

  /** `name` says whose sequence it is in the error of a wait that timed out. */
  constructor(private readonly name: string) {}

  get value(): number {
    return this.at;
  }

  /** Moves to `seq` (also backwards: a copy reloaded from an older snapshot) and wakes who waited for it. */
  set(seq: number): void {
    this.at = seq;
    for (let i = this.waiters.length - 1; i >= 0; i--) if (this.waiters[i].seq <= seq) this.waiters.splice(i, 1)[0].wake();
  }

  /** Resolves once `seq` is applied; rejects with UNAVAILABLE after `timeoutMs`. */
  reached(seq: number, timeoutMs = 10_000): Promise<void> {
    if (seq <= this.at) return Promise.resolve();
    if (this.stuck) return Promise.reject(this.stuck);
    return new Promise((resolve, reject) => {
      const waiter = { seq, wake: () => (clearTimeout(timer), resolve()), refuse: (err: Error) => (clearTimeout(timer), reject(err)) };
      const timer = setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new PierError('UNAVAILABLE', `${this.name}: did not reach ${seq} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** The copy stops at `at` for good: who waits past it, now or later, is refused with `why` (not left to time out). */
  stop(why: Error): void {
    this.stuck = why;
    for (const w of this.waiters.splice(0)) w.refuse(why);
  }

  /** Wakes every waiter now (the copy is closing: what they wait for will not come). */
  releaseAll(): void {
    for (const w of this.waiters.splice(0)) w.wake();
  }
}

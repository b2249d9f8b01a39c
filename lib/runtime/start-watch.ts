/**
 * A process that waits at start says what it waits for, at least every 10 s (docs/operations.md
 * "What each failure costs"): a replica that cannot come back (JetStream electing its leaders, a
 * store that does not answer) is seen waiting, not silent. The step is the role being started; the
 * reason is the last one a retry gave (`sayWaiting`, from lib/state/jetstream.ts's retries).
 */
export const START_REPORT_MS = 10_000;

let heard: ((reason: string) => void) | null = null;

/** Called by a retry at start with why it waits (one process starts once: one listener). */
export function sayWaiting(reason: string): void {
  heard?.(reason);
}

export interface StartLog {
  warn(fields: Record<string, unknown>, msg: string): void;
}

export class StartWatch {
  private step = 'connecting';
  private reason: string | null = null;
  private readonly began = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(log: StartLog, everyMs = START_REPORT_MS) {
    heard = (reason) => (this.reason = reason.slice(0, 200));
    this.timer = setInterval(() => {
      const waited = Math.round((Date.now() - this.began) / 1000);
      log.warn({ step: this.step, reason: this.reason, waitedS: waited }, `starting: still waiting for ${this.step}${this.reason ? ` (${this.reason})` : ''} after ${waited} s`);
    }, everyMs);
    this.timer.unref();
  }

  /** The step started now (what a report names). */
  at(step: string): void {
    this.step = step;
    this.reason = null;
  }

  done(): void {
    clearInterval(this.timer);
    heard = null;
  }
}

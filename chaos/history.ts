import { createWriteStream, type WriteStream } from 'node:fs';

/**
 * The run's history: one JSON line per invocation, per outcome and per fault, written as they
 * happen (a crash of the runner keeps what was written). The checker (check.ts) reads only this
 * file and what is on disk: it shares no code with the system under test.
 *
 * An operation is `invoke` then exactly one of `ok` (acknowledged: its effect is promised),
 * `fail` (refused: no effect promised) or `unknown` (no answer: it may or may not have happened).
 */
export type Phase = 'invoke' | 'ok' | 'fail' | 'unknown' | 'info';

export interface HistoryLine {
  /** Milliseconds since the epoch, at the runner. */
  t: number;
  /** Order of writing (ties in `t` are common). */
  n: number;
  /** The workload or part: `vault`, `upload`, `ws`, `users`, `fault`, `process`… */
  kind: string;
  phase: Phase;
  /** What was done: `create`, `read`, `kill -9`… */
  op: string;
  /** The operation's id: an invocation and its outcome share it. */
  id: string;
  [field: string]: unknown;
}

export class History {
  private n = 0;
  private ids = 0;
  private readonly out: WriteStream;
  readonly lines: HistoryLine[] = [];
  /**
   * Fields every line carries from now on (an upgrade stamps the cluster's build phase on each
   * operation, so the history shows on which build a write was acknowledged and a read answered).
   */
  private stamp: Record<string, unknown> = {};

  constructor(readonly path: string) {
    this.out = createWriteStream(path, { flags: 'w' });
  }

  private write(line: Omit<HistoryLine, 't' | 'n'>): void {
    // A workload still running when a failed run closed the history has nothing left to add.
    if (this.out.writableEnded) return;
    const full = { t: Date.now(), n: this.n++, ...this.stamp, ...line } as HistoryLine;
    this.lines.push(full);
    this.out.write(`${JSON.stringify(full)}\n`);
  }

  /** Records an invocation; its outcome is recorded with the returned id. */
  invoke(kind: string, op: string, fields: Record<string, unknown> = {}): string {
    const id = `${kind}-${++this.ids}`;
    this.write({ kind, phase: 'invoke', op, id, ...fields });
    return id;
  }

  ok(kind: string, op: string, id: string, fields: Record<string, unknown> = {}): void {
    this.write({ kind, phase: 'ok', op, id, ...fields });
  }

  fail(kind: string, op: string, id: string, fields: Record<string, unknown> = {}): void {
    this.write({ kind, phase: 'fail', op, id, ...fields });
  }

  unknown(kind: string, op: string, id: string, fields: Record<string, unknown> = {}): void {
    this.write({ kind, phase: 'unknown', op, id, ...fields });
  }

  info(kind: string, op: string, fields: Record<string, unknown> = {}): void {
    this.write({ kind, phase: 'info', op, id: `${kind}-info-${++this.ids}`, ...fields });
  }

  /** Stamps `fields` on every line written after this (replacing the previous stamp). */
  setStamp(fields: Record<string, unknown>): void {
    this.stamp = { ...fields };
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.out.end(resolve));
  }
}

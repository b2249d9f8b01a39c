/**
 * The timeouts of waits that mostly take the same time (each exchange has its own): per duration, a
 * list of the waits in the order they began, and one Node timer per list, set for the end of its
 * first wait. A Node timer per wait was a Timeout object, its async-hooks bookkeeping and a clear
 * per in-process request (about a quarter of a microsecond of a vault read). A wait ends no sooner
 * than `ms` after it began, as with setTimeout; a list with no wait holds no timer, so a wait keeps
 * the process alive exactly as long as its setTimeout did.
 */
export interface Deadline {
  /** The wait is over before its end: `fire` will not be called. */
  cancel(): void;
}

/** A list of waits of one duration: the sentinel of a ring of waits. */
class Line {
  prev: Line | Wait = this;
  next: Line | Wait = this;
  timer: NodeJS.Timeout | null = null;

  constructor(readonly ms: number) {}
}

class Wait implements Deadline {
  prev: Line | Wait;
  next: Line | Wait;

  constructor(
    readonly at: number,
    readonly fire: () => void,
    /** Null once it fired or was cancelled. */
    public line: Line | null,
    private readonly owner: Deadlines,
  ) {
    this.prev = line!.prev;
    this.next = line!;
    line!.prev.next = this;
    line!.prev = this;
  }

  cancel(): void {
    const line = this.line;
    if (line === null) return;
    this.unlink();
    if (line.next === line) this.owner.emptied(line);
  }

  unlink(): void {
    this.prev.next = this.next;
    this.next.prev = this.prev;
    this.line = null;
  }
}

export class Deadlines {
  private readonly lines = new Map<number, Line>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Calls `fire` once `ms` have passed, unless cancelled first. */
  after(ms: number, fire: () => void): Deadline {
    let line = this.lines.get(ms);
    if (line === undefined) this.lines.set(ms, (line = new Line(ms)));
    const wait = new Wait(this.now() + ms, fire, line, this);
    line.timer ??= setTimeout(() => this.expire(line), ms);
    return wait;
  }

  /** Waits left, all durations together (tests). */
  get size(): number {
    let n = 0;
    for (const line of this.lines.values()) for (let w = line.next; w !== line; w = (w as Wait).next) n++;
    return n;
  }

  /** Node timers set now (tests): one per duration with waits. */
  get timers(): number {
    let n = 0;
    for (const line of this.lines.values()) if (line.timer !== null) n++;
    return n;
  }

  /** A list's last wait is over: its timer goes, and the list with it. */
  emptied(line: Line): void {
    if (line.timer !== null) clearTimeout(line.timer);
    line.timer = null;
    if (this.lines.get(line.ms) === line) this.lines.delete(line.ms);
  }

  /** The list's timer rang: the waits whose end has come fire, in order; the timer is set again for the next. */
  private expire(line: Line): void {
    line.timer = null;
    const now = this.now();
    const due: Wait[] = [];
    while (line.next !== line) {
      const first = line.next as Wait;
      if (first.at > now) {
        line.timer = setTimeout(() => this.expire(line), Math.max(1, Math.ceil(first.at - now)));
        break;
      }
      first.unlink();
      due.push(first);
    }
    if (line.next === line) this.emptied(line);
    for (const w of due) w.fire();
  }
}

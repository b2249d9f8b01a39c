import { randomBytes } from 'node:crypto';
import { checkSubject, type Bus, type BusMessage, type LocalReply, type MessageHandler, type PublishOptions, type RequestManyOptions, type RequestOptions, type SubscribeOptions, type Subscription } from './bus.js';
import { ErrorReasons, PierError } from './errors.js';
import { Deadlines } from './deadlines.js';
import { freezeDeep } from './freeze.js';
import { RouteTable, type MemorySubscription } from './memory-routes.js';

/**
 * The in-process bus for the single-process default. Deliveries are queued and run on a later
 * turn of the event loop (as a network bus would), one FIFO queue for the whole bus, so order
 * per publisher and subject is kept.
 */
export class MemoryBus implements Bus {
  readonly kind = 'memory' as const;
  private readonly table = new RouteTable();
  /** One-shot waiters of `request`, by their inbox: no subscription made and removed per request. */
  private replies = new Map<string, MessageHandler>();
  private pending: Array<() => void> = [];
  private draining = false;
  private closed = false;
  private readonly prefix = `_INBOX.${randomBytes(8).toString('hex')}`;
  /** The timeouts of requests handed over as values (`requestLocal`): one timer per duration, not per request. */
  private readonly deadlines = new Deadlines();
  private inboxCount = 0;

  /**
   * `onHandlerError` hears a subscriber's exception; it never stops other deliveries.
   * `freezeShared`: what `requestLocal` passes by reference is deep-frozen (the tests turn it on,
   * through the config's `PIER_FREEZE_SHARED`: this module reads no environment of its own).
   */
  constructor(
    private readonly onHandlerError: (err: unknown) => void = (err) => console.error(err),
    private readonly freezeShared = false,
  ) {}

  publish(subject: string, data: Uint8Array, options: PublishOptions = {}): void {
    this.assertOpen();
    this.checkPublished(subject);
    const msg: BusMessage = { subject, data, headers: options.headers, reply: options.reply };
    const waiter = this.replies.get(subject);
    if (waiter) {
      this.replies.delete(subject);
      this.enqueue(() => waiter(msg));
    }
    for (const sub of this.table.pick(subject)) {
      this.enqueue(() => {
        if (sub.active) sub.handler(msg);
      });
    }
  }

  subscribe(subject: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscription {
    this.assertOpen();
    checkSubject(subject, true);
    const sub: MemorySubscription = {
      subject,
      tokens: subject.split('.'),
      queue: options.queue,
      handler,
      local: options.local,
      active: true,
      unsubscribe: () => {
        if (!sub.active) return;
        sub.active = false;
        this.table.remove(sub);
      },
    };
    this.table.add(sub);
    return sub;
  }

  request(subject: string, data: Uint8Array, options: RequestOptions): Promise<BusMessage> {
    this.assertOpen();
    try {
      this.checkPublished(subject);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.table.pick(subject).length === 0) {
      return Promise.reject(new PierError('UNAVAILABLE', `no responders for ${subject}`, { reason: ErrorReasons.NO_RESPONDERS }));
    }
    return new Promise((resolve, reject) => {
      const reply = this.inbox();
      const timer = setTimeout(() => {
        this.replies.delete(reply);
        reject(new PierError('TIMEOUT', `request to ${subject} timed out after ${options.timeoutMs} ms`));
      }, options.timeoutMs);
      // The first answer settles it; the waiter is gone with it (a second answer reaches nobody).
      this.replies.set(reply, (msg) => {
        clearTimeout(timer);
        resolve(msg);
      });
      this.publish(subject, data, { reply, headers: options.headers });
    });
  }

  /**
   * A request handed as a value to the one subscriber that takes values (a `shared` endpoint's
   * replica), in the same FIFO queue as every other delivery, its answer too: no codec, and the
   * work of one turn still runs together (answering in the caller's turn instead cost more CPU
   * per call, not less: fewer requests per wake-up). Undefined when anyone else hears the subject
   * (a tap must see the bytes) or the receiver takes bytes only: the caller sends bytes then.
   */
  requestLocal(subject: string, value: unknown, options: RequestOptions): Promise<LocalReply> | undefined {
    this.assertOpen();
    this.checkPublished(subject);
    const receivers = this.table.pick(subject);
    const server = receivers.length === 1 ? receivers[0] : undefined;
    if (!server?.local) return undefined;
    const serve = server.local;
    const shared = this.freezeShared ? freezeDeep(value) : value;
    return new Promise((resolve, reject) => {
      const timeout = this.deadlines.after(options.timeoutMs, () => reject(new PierError('TIMEOUT', `request to ${subject} timed out after ${options.timeoutMs} ms`)));
      const answer = (reply: LocalReply) =>
        this.enqueue(() => {
          timeout.cancel();
          try {
            if (this.freezeShared) freezeDeep(reply);
          } finally {
            resolve(reply);
          }
        });
      this.enqueue(() => {
        // Gone since it was picked: as with bytes, the request is lost and times out.
        if (!server.active) return;
        serve(shared).then(answer, (err: unknown) => {
          this.onHandlerError(err);
          answer({ ok: false, error: new PierError('INTERNAL', 'internal error').toWire() });
        });
      });
    });
  }

  requestMany(subject: string, data: Uint8Array, options: RequestManyOptions): Promise<BusMessage[]> {
    this.assertOpen();
    try {
      this.checkPublished(subject);
    } catch (err) {
      return Promise.reject(err);
    }
    const receivers = this.table.pick(subject).length;
    if (receivers === 0) return Promise.resolve([]);
    const expected = Math.min(receivers, options.expected ?? receivers);
    return new Promise((resolve) => {
      const got: BusMessage[] = [];
      const reply = this.inbox();
      let stall: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        clearTimeout(stall);
        sub.unsubscribe();
        resolve(got);
      };
      const timer = setTimeout(finish, options.timeoutMs);
      const sub = this.subscribe(reply, (msg) => {
        got.push(msg);
        clearTimeout(stall);
        if (got.length >= expected) finish();
        else if (options.expected === undefined) stall = setTimeout(finish, options.stallMs);
      });
      this.publish(subject, data, { reply, headers: options.headers });
    });
  }

  inbox(): string {
    return `${this.prefix}.${++this.inboxCount}`;
  }

  async flush(): Promise<void> {
    while (this.pending.length > 0 || this.draining) await new Promise((r) => setImmediate(r));
  }

  connectionLosses(): number {
    return 0;
  }

  isConnected(): boolean {
    return !this.closed;
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    this.table.clear();
    this.replies.clear();
  }

  /**
   * A subject may be published to: checked token by token the first time; a subject with a route
   * kept (only checked subjects get one) or one of this bus's own inboxes is known to be valid.
   */
  private checkPublished(subject: string): void {
    if (this.table.known(subject) || this.isOwnInbox(subject)) return;
    checkSubject(subject, false);
  }

  /** A subject this bus's `inbox()` made (`<prefix>.<n>`): valid by construction. */
  private isOwnInbox(subject: string): boolean {
    return subject.startsWith(this.prefix) && subject.charCodeAt(this.prefix.length) === 46 /* . */ && /^\d+$/.test(subject.slice(this.prefix.length + 1));
  }

  private enqueue(delivery: () => void): void {
    this.pending.push(delivery);
    if (!this.draining) {
      this.draining = true;
      setImmediate(() => this.drain());
    }
  }

  private drain(): void {
    // Take the current batch only: deliveries queued by handlers run on the next turn, so a
    // handler that publishes in a loop cannot starve I/O.
    const batch = this.pending;
    this.pending = [];
    for (const delivery of batch) {
      try {
        delivery();
      } catch (err) {
        this.onHandlerError(err);
      }
    }
    if (this.pending.length > 0) setImmediate(() => this.drain());
    else this.draining = false;
  }

  private assertOpen(): void {
    if (this.closed) throw new PierError('UNAVAILABLE', 'bus is closed');
  }
}

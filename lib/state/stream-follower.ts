import { consumerOpts, type JetStreamClient, type JetStreamSubscription, type JsMsg } from 'nats';

/**
 * Following one JetStream stream for ever, the one way Pier does it (the replicated logs, the
 * vault's bucket views, the token actor's shared failures).
 *
 * The rules it keeps:
 * - Messages reach `onMessage` one at a time, in stream order, each once: after a restart the
 *   follow goes on from the message after the last one handed over (`position`).
 * - It reads through an ordered consumer with 1 s heartbeats: when the consumer's node goes, two
 *   missed heartbeats make the client re-create it. When that fails too (the stream electing a
 *   leader), the subscription ends; a new one is made after 100 ms, then after a pause doubling
 *   up to 2 s, until one holds.
 * - Nothing it meets is thrown: a failed subscription, a subscription that ends in an error and a
 *   throwing `onMessage` are told to `onError`, and the follow goes on (past that message: the
 *   same message would throw again).
 * - `close` stops it wherever it is (reading, pausing, subscribing) and resolves once it has
 *   stopped; nothing is handed over after `close` was called. `onMessage` may call it.
 */
export interface FollowOptions {
  /** The stream, by name: an identity may not be allowed to look a stream up by subject. */
  stream: string;
  /** The subjects read (a filter: a KV bucket's are `$KV.<bucket>.>`). */
  subject: string;
  /** The first stream sequence wanted (1: the whole stream). */
  from: number;
  onMessage: (m: JsMsg) => void;
  onError?: (err: unknown, what: string) => void;
  /**
   * The pause before subscription number `attempt` (0 first) after the last one ended:
   * `pauseBefore` unless given. Unit tests give shorter ones, so as not to wait the real ones out.
   */
  pause?: (attempt: number) => number;
}

/** What the follower needs of a JetStream client (all of it, in production; a stub in unit tests). */
export type Subscriber = Pick<JetStreamClient, 'subscribe'>;

const HEARTBEAT_MS = 1_000;

/** The pause before subscription number `attempt` (0 first) after the last one ended. */
export const pauseBefore = (attempt: number) => Math.min(2_000, 100 * 2 ** attempt);

export class StreamFollower {
  /** The last stream sequence handed to `onMessage` (`from - 1` before the first). */
  position: number;
  private closed = false;
  private sub: JetStreamSubscription | null = null;
  private readonly closing: Promise<null>;
  private signalClosing!: () => void;
  private running: Promise<void> = Promise.resolve();

  private constructor(
    private readonly js: Subscriber,
    private readonly options: FollowOptions,
  ) {
    this.position = Math.max(0, options.from - 1);
    this.closing = new Promise((r) => (this.signalClosing = () => r(null)));
  }

  /** Starts following; the first subscription's failure is thrown (the caller decides whether to try again). */
  static async start(js: Subscriber, options: FollowOptions): Promise<StreamFollower> {
    const follower = new StreamFollower(js, options);
    const first = await follower.subscribe();
    follower.running = follower.run(first);
    return follower;
  }

  close(): Promise<void> {
    this.closed = true;
    this.signalClosing();
    this.sub?.unsubscribe();
    return this.running;
  }

  private async run(first: JetStreamSubscription | null): Promise<void> {
    let sub = first;
    while (sub && !this.closed) {
      await this.read(sub);
      sub = null;
      for (let attempt = 0; !sub && !this.closed; attempt++) {
        await this.pause((this.options.pause ?? pauseBefore)(attempt));
        if (this.closed) break;
        try {
          sub = await this.subscribe();
        } catch (err) {
          this.report(err, `following ${this.options.stream} again`);
        }
      }
    }
  }

  /** One ordered consumer from the message after `position`; null when closed meanwhile. */
  private async subscribe(): Promise<JetStreamSubscription | null> {
    const opts = consumerOpts();
    opts.orderedConsumer();
    opts.idleHeartbeat(HEARTBEAT_MS);
    if (this.position > 0) opts.startSequence(this.position + 1);
    else opts.deliverAll();
    opts.bindStream(this.options.stream);
    const making = this.js.subscribe(this.options.subject, opts);
    // Not waited for past `close`: a subscription made after it is ended as soon as it is there.
    const sub = await Promise.race([making, this.closing]);
    if (sub === null) {
      making.then((s) => s.unsubscribe()).catch(() => undefined);
      return null;
    }
    this.sub = sub;
    return sub;
  }

  private async read(sub: JetStreamSubscription): Promise<void> {
    try {
      for await (const m of sub) {
        if (this.closed) break;
        this.position = m.seq;
        try {
          this.options.onMessage(m);
        } catch (err) {
          this.report(err, `handling message ${m.seq} of ${this.options.stream}`);
        }
      }
    } catch (err) {
      this.report(err, `reading ${this.options.stream}`);
    } finally {
      this.sub = null;
      if (!sub.isClosed()) sub.unsubscribe();
    }
  }

  /** Waits `ms`, or less when closed meanwhile. */
  private async pause(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((r) => (timer = setTimeout(r, ms))), this.closing]);
    clearTimeout(timer);
  }

  private report(err: unknown, what: string): void {
    try {
      this.options.onError?.(err, what);
    } catch {
      // a reporter that throws changes nothing: the follow goes on
    }
  }
}

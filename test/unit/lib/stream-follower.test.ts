import test from 'ava';
import type { ConsumerOptsBuilder, JetStreamSubscription, JsMsg } from 'nats';
import { pauseBefore, StreamFollower, type FollowOptions, type Subscriber } from '../../../lib/state/stream-follower.js';
import { until, within } from '../../helpers/wait.js';

// The follower against a stream held in memory: what it asks of JetStream is one call,
// `subscribe(subject, opts)`, answered here by subscriptions that deliver from the start sequence
// the options name. (The real thing runs under the JetStream contract and e2e tests.)

/** One subscription: delivers what it is given until it is ended (by the stream, or unsubscribed). */
class StubSubscription {
  private readonly queue: JsMsg[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private failure: Error | null = null;
  unsubscribed = false;

  push(m: JsMsg): void {
    this.queue.push(m);
    this.wake?.();
  }

  /** The stream ends it (its node gone, an election), with an error or without. */
  end(failure: Error | null = null): void {
    this.ended = true;
    this.failure = failure;
    this.wake?.();
  }

  unsubscribe(): void {
    this.unsubscribed = true;
    this.end();
  }

  isClosed(): boolean {
    return this.ended;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<JsMsg> {
    for (;;) {
      const m = this.queue.shift();
      if (m) yield m;
      else if (this.ended) {
        if (this.failure) throw this.failure;
        return;
      } else await new Promise<void>((r) => (this.wake = r));
    }
  }
}

/** A stream: its messages (sequence = index + 1), its subscriptions, and the starts they were asked for. */
class StubStream implements Subscriber {
  readonly data: string[] = [];
  readonly subs: StubSubscription[] = [];
  readonly starts: number[] = [];
  /** Subscriptions still to refuse; and, when set, a subscribe that answers only when told. */
  refuse = 0;
  hold: { release: () => void } | null = null;

  append(...values: string[]): void {
    for (const v of values) {
      this.data.push(v);
      const m = this.message(this.data.length);
      for (const s of this.subs) if (!s.isClosed()) s.push(m);
    }
  }

  private message(seq: number): JsMsg {
    return { seq, data: new TextEncoder().encode(this.data[seq - 1]), subject: 'pier.test' } as unknown as JsMsg;
  }

  live(): StubSubscription | undefined {
    return this.subs.find((s) => !s.isClosed());
  }

  subscribe(_subject: string, opts: unknown): Promise<JetStreamSubscription> {
    const config = (opts as ConsumerOptsBuilder & { getOpts(): { config: { opt_start_seq?: number } } }).getOpts().config;
    const from = config.opt_start_seq ?? 1;
    this.starts.push(from);
    if (this.refuse > 0) {
      this.refuse--;
      return Promise.reject(new Error('stream is electing a leader'));
    }
    const sub = new StubSubscription();
    for (let seq = from; seq <= this.data.length; seq++) sub.push(this.message(seq));
    const make = () => (this.subs.push(sub), sub as unknown as JetStreamSubscription);
    if (!this.hold) return Promise.resolve(make());
    return new Promise((resolve) => (this.hold = { release: () => resolve(make()) }));
  }
}

const text = (m: JsMsg) => new TextDecoder().decode(m.data);

function follow(stream: StubStream, more: Partial<FollowOptions> = {}) {
  const got: string[] = [];
  const errors: string[] = [];
  const started = StreamFollower.start(stream, {
    stream: 'TEST',
    subject: 'pier.test',
    from: 1,
    onMessage: (m) => void got.push(text(m)),
    onError: (err, what) => void errors.push(`${what}: ${(err as Error).message}`),
    ...more,
  });
  return { got, errors, started };
}

test('hands every message once, in order, from the sequence asked for; goes on where it was after the subscription ends', async (t) => {
  const stream = new StubStream();
  stream.append('a', 'b', 'c');
  const { got, errors, started } = follow(stream, { from: 2 });
  const follower = await started;
  await until('b and c', () => got.length === 2);
  stream.live()!.end(); // its node went away and the client could not re-create it
  stream.append('d');
  await until('a second subscription to deliver d', () => got.length === 3);
  t.deepEqual(got, ['b', 'c', 'd']);
  t.deepEqual(stream.starts, [2, 4], 'the second subscription starts after the last message handed over');
  t.is(follower.position, 4);
  t.deepEqual(errors, []);
  await within('close', follower.close());
});

test('hostile: a message whose handler throws is reported and passed; the follow goes on, even when the reporter throws too', async (t) => {
  const stream = new StubStream();
  stream.append('a', 'poison', 'b');
  const got: string[] = [];
  const reported: string[] = [];
  const follower = await StreamFollower.start(stream, {
    stream: 'TEST',
    subject: 'pier.test',
    from: 1,
    onMessage: (m) => {
      if (text(m) === 'poison') throw new Error('cannot handle it');
      got.push(text(m));
    },
    onError: (err, what) => {
      reported.push(`${what}: ${(err as Error).message}`);
      throw new Error('the reporter fails as well');
    },
  });
  stream.append('c');
  await until('the messages after the poison', () => got.length === 3);
  t.deepEqual(got, ['a', 'b', 'c']);
  t.deepEqual(reported, ['handling message 2 of TEST: cannot handle it']);
  t.deepEqual(stream.starts, [1], 'the subscription was not given up for it');
  await within('close', follower.close());
});

/** Pauses between subscriptions of 1 ms: the real ones (100 ms doubling up to 2 s) are not waited out here. */
const short = () => 1;

test('the pause before a new subscription: 100 ms, doubling up to 2 s', (t) => {
  t.deepEqual([0, 1, 2, 3, 4, 5, 10].map(pauseBefore), [100, 200, 400, 800, 1_600, 2_000, 2_000]);
});

test('errors are reported, not thrown: a subscription ending in an error, then refused subscriptions, until one holds', async (t) => {
  const stream = new StubStream();
  stream.append('a');
  const { got, errors, started } = follow(stream, { pause: short });
  const follower = await started;
  await until('a', () => got.length === 1);
  stream.refuse = 2;
  stream.live()!.end(new Error('consumer deleted'));
  stream.append('b');
  await until('b through the third subscription after the failure', () => got.length === 2);
  t.deepEqual(got, ['a', 'b']);
  t.deepEqual(errors, ['reading TEST: consumer deleted', 'following TEST again: stream is electing a leader', 'following TEST again: stream is electing a leader']);
  t.deepEqual(stream.starts, [1, 2, 2, 2]);
  await within('close', follower.close());
});

test('the first subscription failing is thrown to the caller, who decides whether to try again', async (t) => {
  const stream = new StubStream();
  stream.refuse = 1;
  await t.throwsAsync(follow(stream).started, { message: 'stream is electing a leader' });
});

test('hostile: close during a pause between subscriptions returns without waiting the pause out, and nothing is subscribed after', async (t) => {
  const stream = new StubStream();
  // Four short pauses, then a long one (a minute).
  const { errors, started } = follow(stream, { pause: (attempt) => (attempt < 4 ? 1 : 60_000) });
  const follower = await started;
  stream.refuse = Infinity;
  stream.live()!.end();
  // Refused four times: the pause now running is a minute.
  await until('four refusals', () => errors.length >= 4);
  const tried = stream.starts.length;
  await within('close to return during a pause of a minute', follower.close(), 1_000);
  t.is(stream.starts.length, tried, 'no subscription after close');
});

test('hostile: close while a subscription is being made returns at once; the subscription made after it is ended, and delivers nothing', async (t) => {
  const stream = new StubStream();
  const { got, errors, started } = follow(stream, { pause: short });
  const follower = await started;
  stream.hold = { release: () => undefined };
  stream.live()!.end();
  await until('the second subscription to be asked for', () => stream.starts.length === 2);
  await within('close while subscribing', follower.close(), 1_000);
  stream.append('late');
  stream.hold.release();
  await until('the late subscription to be ended', () => stream.subs.length === 2 && stream.subs[1].unsubscribed);
  t.deepEqual(got, []);
  t.deepEqual(errors, []);
});

test('close from inside the handler: nothing more is handed over', async (t) => {
  const stream = new StubStream();
  const got: string[] = [];
  let follower: StreamFollower | null = null;
  let closed: Promise<void> | null = null;
  follower = await StreamFollower.start(stream, {
    stream: 'TEST',
    subject: 'pier.test',
    from: 1,
    onMessage: (m) => {
      got.push(text(m));
      if (text(m) === 'b') closed = follower!.close();
    },
  });
  stream.append('a', 'b', 'c');
  await until('the handler to close it', () => closed !== null);
  await within('close', closed!);
  stream.append('d');
  t.deepEqual(got, ['a', 'b']);
  t.true(stream.subs[0].unsubscribed);
});

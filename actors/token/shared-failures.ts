import { DiscardPolicy, type JetStreamClient, type JetStreamManager } from 'nats';
import { randomBytes } from 'node:crypto';
import { sharedFailureSchema, tokenState, type SharedFailure } from '../../bus/subjects.js';
import { compile } from '../../bus/validation.js';
import { ensureStream, retryWhileStarting } from '../../lib/state/jetstream.js';
import { readRecordIfOurs, recordBytes } from '../../lib/state/record-format.js';
import type { FailureLimiter } from '../../lib/policy/rate-limit.js';
import { StreamFollower } from '../../lib/state/stream-follower.js';

/** Failures being appended at once; past it a failure is counted locally only (and counted as not shared). */
const MAX_IN_FLIGHT = 1_000;

/**
 * The token actor's failure limits shared across replicas and hosts (docs/operations.md "How writes stay correct"): each
 * failure a replica counts is appended to a stream that keeps it for one failure window (its
 * replicas copies), and every replica counts the others' as they arrive; a replica started later
 * reads the window's failures first. A brute force spread over replicas is limited as one.
 *
 * Bounded: a key already blocked shares nothing more (the block is known everywhere), the stream
 * keeps one window and at most `maxMessages`, and at most MAX_IN_FLIGHT appends wait at once.
 */
export class SharedFailures {
  private readonly origin = randomBytes(8).toString('base64url');
  private inFlight = 0;
  private follower: StreamFollower | null = null;
  private readonly check = compile(sharedFailureSchema);

  private constructor(
    private readonly js: JetStreamClient,
    private readonly limiters: Record<SharedFailure['limiter'], FailureLimiter>,
    private readonly onNotShared: () => void,
    /** Told what the follow meets and goes on past (a failure of a later format, refused by name). */
    private readonly onError?: (err: unknown, what: string) => void,
  ) {}

  static async start(
    js: JetStreamClient,
    manager: () => Promise<JetStreamManager>,
    limiters: Record<SharedFailure['limiter'], FailureLimiter>,
    options: { replicas: number; windowMs: number; maxMessages?: number; onNotShared?: () => void; onError?: (err: unknown, what: string) => void },
  ): Promise<SharedFailures> {
    const shared = new SharedFailures(js, limiters, options.onNotShared ?? (() => undefined), options.onError);
    await retryWhileStarting(async () => {
      const jsm = await manager();
      const retention = { discard: DiscardPolicy.Old, max_age: options.windowMs * 1_000_000, max_msgs: options.maxMessages ?? 1_000_000 };
      await ensureStream(jsm, { name: tokenState.stream, subjects: [tokenState.subject], num_replicas: options.replicas, ...retention }, 'update');
      await shared.follow(jsm);
    });
    for (const [limiter, l] of Object.entries(limiters) as Array<[SharedFailure['limiter'], FailureLimiter]>) {
      l.onCounted = (key, at) => shared.append({ limiter, key, at, origin: shared.origin });
    }
    return shared;
  }

  /** Reads the stream (one window of failures) and then every new one, for ever. */
  private async follow(jsm: JetStreamManager): Promise<void> {
    const last = (await jsm.streams.info(tokenState.stream)).state.last_seq;
    let caughtUp!: () => void;
    const ready = new Promise<void>((r) => (caughtUp = r));
    if (last === 0) caughtUp();
    this.follower = await StreamFollower.start(this.js, {
      stream: tokenState.stream,
      subject: tokenState.subject,
      from: 1,
      onMessage: (m) => {
        if (m.seq >= last) caughtUp();
        this.hear(m.data, m.seq);
      },
      onError: this.onError,
    });
    // A replica that cannot read the window in time starts counting from nothing rather than not at all.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([ready, new Promise((r) => (timer = setTimeout(r, 5_000)))]);
    clearTimeout(timer);
  }

  /** One failure another replica counted; one of a later format is refused by name (the follower reports it), never counted half-read. */
  private hear(data: Uint8Array, seq: number): void {
    const f = readRecordIfOurs<SharedFailure>('sharedFailure', data, `the ${tokenState.stream} stream at ${seq}`);
    if (f === undefined || this.check(f).length > 0 || f.origin === this.origin) return;
    this.limiters[f.limiter].record(f.key, f.at);
  }

  private append(f: SharedFailure): void {
    if (this.inFlight >= MAX_IN_FLIGHT) return this.onNotShared();
    this.inFlight++;
    this.js
      .publish(tokenState.subject, recordBytes('sharedFailure', f), { timeout: 2_000 })
      .catch(() => this.onNotShared())
      .finally(() => this.inFlight--);
  }

  close(): void {
    void this.follower?.close();
    for (const l of Object.values(this.limiters)) l.onCounted = undefined;
  }
}

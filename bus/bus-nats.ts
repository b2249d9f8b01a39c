import { connect, Events, ErrorCode, headers as natsHeaders, createInbox, RequestStrategy, type JetStreamClient, type JetStreamManager, type MsgHdrs, type NatsConnection, type Msg } from 'nats';
import { checkSubject, type Bus, type BusSealing, type BusMessage, type Headers, type MessageHandler, type PublishOptions, type RequestManyOptions, type RequestOptions, type Subscription } from './bus.js';
import { ErrorReasons, PierError } from './errors.js';

export interface NatsBusOptions {
  url: string;
  /** Shown in `nats-server` connection lists; helps an operator see which process is which. */
  name: string;
  /** The role identity; absent: anonymous. */
  user?: string;
  password?: string;
  /** PEM files: the CA to check the server with, and a client certificate (mutual TLS). */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** Where this connection's replies arrive: only its identity may subscribe there. */
  inboxPrefix?: string;
  onStatus?: (event: 'disconnect' | 'reconnect' | 'error', detail: string) => void;
  /** The server refused a publish or a subscription of this connection (its permissions). */
  onPermissionRefusal?: (operation: string, subject: string) => void;
  onHandlerError?: (err: unknown) => void;
}

function toNatsHeaders(h: Headers | undefined): MsgHdrs | undefined {
  if (!h) return undefined;
  const out = natsHeaders();
  for (const [k, v] of Object.entries(h)) out.set(k, v);
  return out;
}

function fromNatsHeaders(h: MsgHdrs | undefined): Headers | undefined {
  if (!h) return undefined;
  const out: Headers = {};
  for (const k of h.keys()) out[k] = h.get(k);
  return out;
}

function toBusMessage(m: Msg): BusMessage {
  return { subject: m.subject, data: m.data, headers: fromNatsHeaders(m.headers), reply: m.reply || undefined };
}

/**
 * The bus over a NATS server or cluster. The client reconnects forever: a restart of
 * `nats-server` is a pause, not an end (subscriptions are re-established by the client).
 */
export class NatsBus implements Bus {
  readonly kind = 'nats' as const;
  /** Set once by the composition root, before any role starts (bus.ts). */
  sealing: BusSealing | undefined = undefined;
  private connected = true;
  /** Connection losses so far (each Disconnect status): see Bus.connectionLosses. */
  private losses = 0;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsBusOptions,
  ) {
    void this.watchStatus();
  }

  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    try {
      const nc = await connect({
        servers: options.url.split(','),
        name: options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        pingInterval: 10_000,
        // Without it nats.js captures a stack (a new Error) twice per request and JetStream publish,
        // in case it times out: the bus asks, the vault's commits and the audit's appends are each
        // one, and on a vault create on JetStream R3 those captures were about 5 % of Pier's CPU
        // (docs/performance.md "Vault writes"). A request that times out still fails with its code
        // (TIMEOUT, which Pier turns into its own error); only the caller's frames are not appended.
        noAsyncTraces: true,
        ...(options.user ? { user: options.user, pass: options.password } : {}),
        ...(options.tls ? { tls: options.tls } : {}),
        ...(options.inboxPrefix ? { inboxPrefix: options.inboxPrefix } : {}),
      });
      return new NatsBus(nc, options);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === ErrorCode.AuthorizationViolation) {
        throw new PierError('UNAUTHORIZED', `NATS at ${options.url} refused the credentials${options.user ? ` of "${options.user}"` : ' (none were given: set NATS_CREDS)'}`, { cause: err });
      }
      throw new PierError('UNAVAILABLE', `cannot connect to NATS at ${options.url}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The version the server said in its INFO (null before it said one). */
  serverVersion(): string | null {
    return this.nc.info?.version ?? null;
  }

  publish(subject: string, data: Uint8Array, options: PublishOptions = {}): void {
    checkSubject(subject, false);
    this.nc.publish(subject, data, { headers: toNatsHeaders(options.headers), reply: options.reply });
  }

  subscribe(subject: string, handler: MessageHandler, options: { queue?: string } = {}): Subscription {
    checkSubject(subject, true);
    const sub = this.nc.subscribe(subject, {
      queue: options.queue,
      callback: (err, msg) => {
        if (err) return this.options.onHandlerError?.(err);
        try {
          handler(toBusMessage(msg));
        } catch (e) {
          (this.options.onHandlerError ?? console.error)(e);
        }
      },
    });
    return { subject, unsubscribe: () => sub.unsubscribe(), drain: () => sub.drain() };
  }

  async request(subject: string, data: Uint8Array, options: RequestOptions): Promise<BusMessage> {
    checkSubject(subject, false);
    try {
      const m = await this.nc.request(subject, data, { timeout: options.timeoutMs, headers: toNatsHeaders(options.headers) });
      return toBusMessage(m);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === ErrorCode.NoResponders) throw new PierError('UNAVAILABLE', `no responders for ${subject}`, { cause: err, reason: ErrorReasons.NO_RESPONDERS });
      if (code === ErrorCode.Timeout) throw new PierError('TIMEOUT', `request to ${subject} timed out after ${options.timeoutMs} ms`, { cause: err });
      if (code === ErrorCode.PermissionsViolation) throw new PierError('FORBIDDEN', `bus: this identity may not publish to ${subject}`, { cause: err });
      throw new PierError('UNAVAILABLE', `request to ${subject} failed: ${(err as Error).message}`, { cause: err });
    }
  }

  async requestMany(subject: string, data: Uint8Array, options: RequestManyOptions): Promise<BusMessage[]> {
    checkSubject(subject, false);
    const got: BusMessage[] = [];
    try {
      const replies = await this.nc.requestMany(
        subject,
        data,
        options.expected === undefined
          ? { strategy: RequestStrategy.JitterTimer, maxWait: options.timeoutMs, jitter: options.stallMs, headers: toNatsHeaders(options.headers) }
          : { strategy: RequestStrategy.Count, maxWait: options.timeoutMs, maxMessages: options.expected, headers: toNatsHeaders(options.headers) },
      );
      for await (const m of replies) got.push(toBusMessage(m));
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === ErrorCode.PermissionsViolation) throw new PierError('FORBIDDEN', `bus: this identity may not publish to ${subject}`, { cause: err });
      if (code !== ErrorCode.NoResponders) throw new PierError('UNAVAILABLE', `request to ${subject} failed: ${(err as Error).message}`, { cause: err });
    }
    return got;
  }

  /** JetStream on this connection (replicated state, docs/operations.md "How writes stay correct"). */
  jetstream(): { js: JetStreamClient; manager: () => Promise<JetStreamManager> } {
    return { js: this.nc.jetstream(), manager: () => this.nc.jetstreamManager() };
  }

  inbox(): string {
    return createInbox(this.options.inboxPrefix);
  }

  async flush(): Promise<void> {
    await this.nc.flush();
  }

  isConnected(): boolean {
    return this.connected && !this.nc.isClosed();
  }

  connectionLosses(): number {
    return this.losses;
  }

  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain().catch(() => this.nc.close());
  }

  private async watchStatus(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === Events.Disconnect) {
        this.connected = false;
        this.losses++;
        this.options.onStatus?.('disconnect', String(s.data));
      } else if (s.type === Events.Reconnect) {
        this.connected = true;
        this.options.onStatus?.('reconnect', String(s.data));
      } else if (s.type === Events.Error) {
        const refused = (s as { permissionContext?: { operation: string; subject: string } }).permissionContext;
        if (refused) this.options.onPermissionRefusal?.(refused.operation, refused.subject);
        else this.options.onStatus?.('error', String(s.data));
      }
    }
  }
}

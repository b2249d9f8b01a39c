import type { Bus, BusMessage, LocalReply, MessageHandler, PublishOptions, RequestManyOptions, RequestOptions, SubscribeOptions, Subscription } from './bus.js';
import { PierError } from './errors.js';
import { allowListMatcher, type RolePermissions } from './permissions.js';

/** Replies go to inboxes; a responder may always answer what it received (NATS `allow_responses`). */
const INBOX = '_INBOX.';

/**
 * A role's view of the bus: the same allow-lists nats-server enforces (bus/permissions.ts),
 * checked before anything leaves. On NATS it turns a refusal the server would drop silently into
 * an error at the call site; on the in-process bus it is the only enforcement, so a role that
 * uses a subject it did not declare fails in every test.
 */
export class GuardedBus implements Bus {
  private readonly mayPublish: (subject: string) => boolean;
  private readonly maySubscribe: (subject: string) => boolean;

  constructor(
    private readonly inner: Bus,
    private readonly role: string,
    permissions: RolePermissions,
    private readonly refused: (role: string, action: 'publish' | 'subscribe', subject: string) => void = () => undefined,
  ) {
    this.mayPublish = allowListMatcher(permissions.publish);
    this.maySubscribe = allowListMatcher(permissions.subscribe);
  }

  get kind() {
    return this.inner.kind;
  }

  get sealing() {
    return this.inner.sealing;
  }

  private check(action: 'publish' | 'subscribe', subject: string): void {
    const may = action === 'publish' ? this.mayPublish : this.maySubscribe;
    if (subject.startsWith(INBOX) || may(subject)) return;
    this.refused(this.role, action, subject);
    throw new PierError('FORBIDDEN', `bus: role ${this.role} may not ${action} ${subject}`);
  }

  publish(subject: string, data: Uint8Array, options?: PublishOptions): void {
    this.check('publish', subject);
    this.inner.publish(subject, data, options);
  }

  subscribe(subject: string, handler: MessageHandler, options?: SubscribeOptions): Subscription {
    this.check('subscribe', subject);
    return this.inner.subscribe(subject, handler, options);
  }

  request(subject: string, data: Uint8Array, options: RequestOptions): Promise<BusMessage> {
    try {
      this.check('publish', subject);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inner.request(subject, data, options);
  }

  requestLocal(subject: string, value: unknown, options: RequestOptions): Promise<LocalReply> | undefined {
    if (!this.inner.requestLocal) return undefined;
    try {
      this.check('publish', subject);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inner.requestLocal(subject, value, options);
  }

  requestMany(subject: string, data: Uint8Array, options: RequestManyOptions): Promise<BusMessage[]> {
    try {
      this.check('publish', subject);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.inner.requestMany(subject, data, options);
  }

  inbox(): string {
    return this.inner.inbox();
  }

  flush(): Promise<void> {
    return this.inner.flush();
  }

  isConnected(): boolean {
    return this.inner.isConnected();
  }

  connectionLosses(): number {
    return this.inner.connectionLosses();
  }

  /** A role's view does not own the connection: the process closes it once. */
  async close(): Promise<void> {}
}

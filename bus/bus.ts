/**
 * The message bus every part of Pier talks through. Two implementations keep this contract:
 * `bus-memory.ts` (one process) and `bus-nats.ts` (NATS). `test/contract/bus-suite.ts` (run by
 * `bus-memory.test.ts` and `bus-nats.test.ts`) holds them to it.
 *
 * Rules an implementation must keep:
 * - Subjects are dot-separated tokens. A subscription may use `*` (exactly one token) and `>` (one or
 *   more trailing tokens). Publishing to a wildcard subject is an error.
 * - Messages published by one publisher to one subject reach each subscription in publish order.
 * - Subscriptions sharing a `queue` name on matching subjects form a queue group: each message goes
 *   to exactly one member of the group (and to every plain subscription as well).
 * - `request` rejects with PierError `UNAVAILABLE` when nobody subscribes to the subject, and with
 *   `TIMEOUT` when nobody answered within the deadline. It never hangs.
 * - `requestMany` collects every answer that comes within the deadline, and stops early once answers
 *   stall for `stallMs` after the first; nobody subscribed is an empty list, at once.
 * - Headers are string to string, and arrive as sent.
 * - Payloads are opaque bytes: encoding is the caller's business (see codec.ts). The one exception
 *   is `requestLocal`, the in-process bus's way to hand a `shared` exchange a value (exchange.ts).
 */
import type { BusMessage, Headers, Reply } from './message.js';
import type { KeyPair, Sealer } from './seal.js';

export type { BusMessage, Headers } from './message.js';

/**
 * How a process seals what must not cross the bus in clear (bus/seal.ts). Absent on the in-process
 * bus, where nothing crosses a wire.
 */
export interface BusSealing {
  /** This process's own key pair, and its boxes. */
  readonly sealer: Sealer;
  /** The key pairs of `role` this process holds: what is sealed to the role opens with them, the role's grants are made with them (empty: it does not hold the role's keys). */
  roleKeys(role: string): readonly KeyPair[];
  /** The anchored key a request to `role` is sealed to (never one only announced); null when the role has no anchor here. */
  recipientFor(role: string): Promise<string | null>;
  /** Whether `key` is an anchored key of `role` (a grant's box must come from one). */
  isAnchored(role: string, key: string): boolean;
  /** `data` signed with `role`'s anchored key (null: this process does not hold it). */
  signAs(role: string, data: Uint8Array): Uint8Array | null;
  /** Whether `sig` over `data` is by an anchored key of `role`. */
  signedAs(role: string, data: Uint8Array, sig: Uint8Array): boolean;
}

export type MessageHandler = (msg: BusMessage) => void;

/** What an endpoint answered: its value, or its error as it would cross a wire. */
export type LocalReply = Reply<unknown>;

/**
 * How a subscriber of an exchange declared `shared` (exchange.ts; served by verbs.ts) takes a request
 * from this same process as a value, without the codec: only the in-process bus uses it (bus-memory.ts).
 */
export type LocalServer = (value: unknown) => Promise<LocalReply>;

export interface SubscribeOptions {
  queue?: string;
  /** The subscriber also takes requests as values from this process (ignored on a wire). */
  local?: LocalServer;
}

export interface Subscription {
  readonly subject: string;
  unsubscribe(): void;
  /**
   * Ends interest and hands over what the server already sent before that (a queue group's
   * requests routed here just before the stop), then resolves; absent: unsubscribe loses nothing.
   */
  drain?(): Promise<void>;
}

export interface PublishOptions {
  headers?: Headers;
  reply?: string;
}

export interface RequestOptions {
  timeoutMs: number;
  headers?: Headers;
}

export interface RequestManyOptions {
  timeoutMs: number;
  /** Stop once answers stall this long after the first (when `expected` is not given). */
  stallMs: number;
  /** Stop as soon as this many answers arrived. */
  expected?: number;
  headers?: Headers;
}

export interface Bus {
  readonly kind: 'memory' | 'nats';
  /** Set on a bus whose messages cross a wire: exchanges declared sealed use it (exchange.ts `seal`; verbs.ts seals). */
  readonly sealing?: BusSealing;
  publish(subject: string, data: Uint8Array, options?: PublishOptions): void;
  subscribe(subject: string, handler: MessageHandler, options?: SubscribeOptions): Subscription;
  request(subject: string, data: Uint8Array, options: RequestOptions): Promise<BusMessage>;
  /**
   * A request to a `shared` endpoint as a value, for the in-process bus only: the value and the
   * answer are passed by reference, in the same queue as every other delivery. Undefined when it
   * cannot go that way (a wire, or a receiver or listener that takes bytes only): send bytes then.
   */
  requestLocal?(subject: string, value: unknown, options: RequestOptions): Promise<LocalReply> | undefined;
  /** Scatter-gather: the answers of every subscriber (see the rules above). */
  requestMany(subject: string, data: Uint8Array, options: RequestManyOptions): Promise<BusMessage[]>;
  /** A fresh subject nobody else uses, for collecting replies. */
  inbox(): string;
  /** Resolves once everything published so far has reached the server (memory: the subscribers). */
  flush(): Promise<void>;
  isConnected(): boolean;
  /**
   * How many times the connection was lost so far (memory: never). Core messages sent meanwhile
   * are not delivered: whoever relies on hearing every one of them checks again after it changes.
   */
  connectionLosses(): number;
  close(): Promise<void>;
}

export const SUBJECT_TOKEN = /^[^\s.*>]+$/;

/** Throws when `subject` is not a valid subject (wildcards allowed only when `forSubscribe`). */
export function checkSubject(subject: string, forSubscribe: boolean): void {
  const tokens = subject.split('.');
  tokens.forEach((token, i) => {
    if (forSubscribe && (token === '*' || (token === '>' && i === tokens.length - 1))) return;
    if (!SUBJECT_TOKEN.test(token)) throw new TypeError(`invalid subject "${subject}"`);
  });
}

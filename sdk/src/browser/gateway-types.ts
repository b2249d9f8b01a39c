// What a gateway connection's user sees (./gateway.ts): its options, its events, its errors.

/** The part of the WebSocket API used here: the browser's own, or `ws` in Node. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

export interface GatewayOptions {
  /** A `{"event":"ping"}` this often (default 30 s, the platform's period; Pier closes after 45 s of silence). */
  pingIntervalMs?: number;
  /** How long a ping may go unanswered (any frame counts) before it is a miss (default 10 s). */
  pongTimeoutMs?: number;
  /** Misses in a row before the connection is taken for dead and replaced (default 2: one lost pong is not death). */
  maxMissedPongs?: number;
  /** Frames kept while (re)connecting, sent in order on open (default 1,000); past it, send() throws. */
  maxQueued?: number;
  /** Reconnect attempts in a row before giving up (default 20), and their backoff. */
  reconnect?: { maxAttempts?: number; baseMs?: number; maxMs?: number };
  /** Opens the socket (default: the global WebSocket). */
  socketFactory?: (url: string) => WebSocketLike;
  /**
   * Ask Pier for what was missed while disconnected (default true): every connection opts in with
   * the `recover` query parameter, carrying the position of the last message seen once there is one.
   * See GatewayEvents.recovery. An edge without history and recovery ignores it; the SDK notices
   * (no recovery frame first) and delivers that connection's frames as before.
   */
  recover?: boolean;
}

/** Where in the user's history the page stands: the last message seen (docs/protocol.md "History and recovery"). */
export interface GatewayPosition {
  epoch: string;
  offset: number;
}

/** Pier's recovery frame, as the `recovery` event hands it on. */
export interface RecoveryInfo {
  /**
   * True: every message kept since the position asked for follows (`missed` of them), so the page's
   * state stays right. **False: the page must reload its state** (from the app), because what it
   * missed cannot be replayed; `reason` says why.
   */
  recovered: boolean;
  /** The position after the replay; both null when history is off (`reason: 'off'`). */
  epoch: string | null;
  offset: number | null;
  /** How many messages are replayed after this event (delivered as `message`, in order). */
  missed: number;
  /** With `recovered: false`: `new` (no position asked: a first connection), `epoch`, `gap`, `off` or `unavailable`. */
  reason?: string;
}

export interface CloseInfo {
  code: number;
  reason: string;
  /** True when another attempt follows; false when this connection is over for good. */
  reconnecting: boolean;
}

export interface GatewayEvents {
  open: () => void;
  /** A frame from the app: its JSON when it parses, its text otherwise. */
  message: (data: unknown) => void;
  close: (info: CloseInfo) => void;
  reconnecting: (info: { attempt: number; delayMs: number }) => void;
  /**
   * Once per connection that recovers (option `recover`, on by default), after `open` and before any
   * `message` of that connection: what Pier could replay. With `recovered: false` **reload your
   * state** (its `reason` other than `new` means messages were missed); with true, the missed
   * messages follow as ordinary `message` events.
   */
  recovery: (info: RecoveryInfo) => void;
}

export class GatewayQueueFullError extends Error {
  override name = 'GatewayQueueFullError';
}

export type GatewayState = 'connecting' | 'open' | 'reconnecting' | 'closed';

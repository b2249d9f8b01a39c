import { backoffDelay } from '../backoff.js';

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
}

export class GatewayQueueFullError extends Error {
  override name = 'GatewayQueueFullError';
}

/** Pier's close codes after which a new connection would be refused or unwanted: the app or the operator ended it. */
const FINAL_CODES = new Set([4001, 4002, 4004]);
const OPEN = 1;
const PONG = '{"event":"pong"}';

export type GatewayState = 'connecting' | 'open' | 'reconnecting' | 'closed';

/**
 * A browser's connection to Pier's gateway (`ws[s]://<app>.<user>.<domain>/ws`, the user's
 * `auth_token` cookie going along): keep-alive with the exact ping and pong, reconnect with
 * jittered backoff after anything but a final close, and a bounded queue of frames sent while
 * reconnecting. Frames are delivered in order; a frame queued is sent at most once.
 */
export class GatewayConnection {
  private socket: WebSocketLike | null = null;
  private readonly queue: string[] = [];
  private readonly listeners: { [K in keyof GatewayEvents]: Set<GatewayEvents[K]> } = { open: new Set(), message: new Set(), close: new Set(), reconnecting: new Set() };
  private attempts = 0;
  private missed = 0;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private pongTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private _state: GatewayState = 'connecting';

  constructor(
    readonly url: string,
    private readonly options: GatewayOptions = {},
  ) {
    this.open();
  }

  get state(): GatewayState {
    return this._state;
  }

  on<K extends keyof GatewayEvents>(type: K, fn: GatewayEvents[K]): () => void {
    this.listeners[type].add(fn);
    return () => this.listeners[type].delete(fn);
  }

  /** Sends `{event, data}`; queued while not connected. Throws when closed for good or the queue is full. */
  send(event: string, data?: unknown): void {
    this.sendRaw(JSON.stringify(data === undefined ? { event } : { event, data }));
  }

  sendRaw(text: string): void {
    if (this._state === 'closed') throw new Error('gateway: the connection is closed');
    if (this._state === 'open' && this.socket?.readyState === OPEN) return this.socket.send(text);
    if (this.queue.length >= (this.options.maxQueued ?? 1000)) throw new GatewayQueueFullError(`gateway: ${this.queue.length} frames already wait for the connection`);
    this.queue.push(text);
  }

  /** Ends the connection for good (no reconnect). */
  close(code = 1000, reason = ''): void {
    if (this._state === 'closed') return;
    this.finish();
    if (this.socket) this.socket.close(code, reason);
    else this.emit('close', { code, reason, reconnecting: false });
  }

  private emit<K extends keyof GatewayEvents>(type: K, ...args: Parameters<GatewayEvents[K]>): void {
    for (const fn of [...this.listeners[type]]) {
      try {
        (fn as (...a: unknown[]) => void)(...args);
      } catch (err) {
        // A listener's bug must not kill the connection's own bookkeeping.
        setTimeout(() => {
          throw err;
        });
      }
    }
  }

  private open(): void {
    const make = this.options.socketFactory ?? ((url: string) => new WebSocket(url) as unknown as WebSocketLike);
    const socket = make(this.url);
    this.socket = socket;
    socket.onopen = () => {
      this._state = 'open';
      this.attempts = 0;
      this.missed = 0;
      this.startKeepAlive();
      this.emit('open');
      while (this.queue.length > 0 && this._state === 'open' && socket.readyState === OPEN) socket.send(this.queue.shift()!);
    };
    socket.onmessage = (ev) => {
      this.alive();
      const text = typeof ev.data === 'string' ? ev.data : String(ev.data);
      if (text === PONG) return;
      let data: unknown = text;
      try {
        data = JSON.parse(text);
      } catch {
        // not JSON: handed on as text
      }
      this.emit('message', data);
    };
    socket.onerror = () => undefined; // the close that follows says everything
    socket.onclose = (ev) => this.ended(socket, ev.code, ev.reason);
  }

  /** `socket` is gone (closed, or given up on): reconnect after a backoff unless that is over. */
  private ended(socket: WebSocketLike, code: number, reason: string): void {
    if (socket !== this.socket) return;
    this.socket = null;
    this.stopKeepAlive();
    if (this._state === 'closed') return this.emit('close', { code, reason, reconnecting: false });
    if (FINAL_CODES.has(code) || this.attempts >= (this.options.reconnect?.maxAttempts ?? 20)) {
      this.finish();
      return this.emit('close', { code, reason, reconnecting: false });
    }
    this._state = 'reconnecting';
    this.emit('close', { code, reason, reconnecting: true });
    const delayMs = backoffDelay(this.attempts, { baseMs: this.options.reconnect?.baseMs ?? 500, maxMs: this.options.reconnect?.maxMs ?? 15_000 });
    this.attempts++;
    this.emit('reconnecting', { attempt: this.attempts, delayMs });
    this.retryTimer = setTimeout(() => this.open(), delayMs);
  }

  private finish(): void {
    this._state = 'closed';
    this.stopKeepAlive();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.queue.length = 0;
  }

  private alive(): void {
    this.missed = 0;
    if (this.pongTimer) clearTimeout(this.pongTimer);
    this.pongTimer = null;
  }

  private startKeepAlive(): void {
    this.pingTimer = setInterval(() => {
      if (this.socket?.readyState !== OPEN) return;
      this.socket.send('{"event":"ping"}');
      if (this.pongTimer) return; // the previous ping's wait still runs
      this.pongTimer = setTimeout(() => {
        this.pongTimer = null;
        const socket = this.socket;
        if (++this.missed < (this.options.maxMissedPongs ?? 2) || !socket) return;
        // A dead network may never finish a close handshake: stop listening and move on now.
        socket.onclose = socket.onmessage = null;
        try {
          socket.close(4100, 'no pong');
        } catch {
          // already closing
        }
        this.ended(socket, 4100, 'no pong');
      }, this.options.pongTimeoutMs ?? 10_000);
    }, this.options.pingIntervalMs ?? 30_000);
  }

  private stopKeepAlive(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    if (this.pongTimer) clearTimeout(this.pongTimer);
    this.pingTimer = this.pongTimer = null;
  }
}

/** Opens a gateway connection (see GatewayConnection). */
export function connectGateway(url: string, options: GatewayOptions = {}): GatewayConnection {
  return new GatewayConnection(url, options);
}

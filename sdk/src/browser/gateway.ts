import { backoffDelay } from '../backoff.js';
import { isObject, isOffset, MESSAGE_EVENT, positionAfter, recoverUrl, recoveryInfo, type FrameMode } from './gateway-frames.js';
import { GatewayQueueFullError, type GatewayEvents, type GatewayOptions, type GatewayPosition, type GatewayState, type RecoveryInfo, type WebSocketLike } from './gateway-types.js';

export { GatewayQueueFullError, type CloseInfo, type GatewayEvents, type GatewayOptions, type GatewayPosition, type GatewayState, type RecoveryInfo, type WebSocketLike } from './gateway-types.js';

/** Pier's close codes after which a new connection would be refused or unwanted: the app or the operator ended it. */
const FINAL_CODES = new Set([4001, 4002, 4004]);
const OPEN = 1;
const PONG = '{"event":"pong"}';

/**
 * A browser's connection to Pier's gateway (`ws[s]://<app>.<user>.<domain>/ws`, the user's
 * `auth_token` cookie going along): keep-alive with the exact ping and pong, reconnect with
 * jittered backoff after anything but a final close, and a bounded queue of frames sent while
 * reconnecting. Frames are delivered in order; a frame queued is sent at most once.
 *
 * Recovery (option `recover`, on by default): each connection asks Pier for the messages kept since
 * the last one seen (`position`), so a page that was offline gets what it missed, in order, and none
 * twice. Each connection first gets a `recovery` event: `recovered: false` means "reload your state".
 */
export class GatewayConnection {
  private socket: WebSocketLike | null = null;
  private readonly queue: string[] = [];
  private readonly listeners: { [K in keyof GatewayEvents]: Set<GatewayEvents[K]> } = { open: new Set(), message: new Set(), close: new Set(), reconnecting: new Set(), recovery: new Set() };
  private attempts = 0;
  private missed = 0;
  private pingTimer: ReturnType<typeof setInterval> | null = null;
  private pongTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private _state: GatewayState = 'connecting';
  private frameMode: FrameMode = 'raw';
  private _position: GatewayPosition | null = null;
  private _recovered: boolean | null = null;

  constructor(
    readonly url: string,
    private readonly options: GatewayOptions = {},
  ) {
    this.open();
  }

  get state(): GatewayState {
    return this._state;
  }

  /**
   * The last recovery frame's `recovered` (null before any). False means the page's state must be
   * reloaded. It stays as it was across a connection to an edge without recovery, which sends none.
   */
  get recovered(): boolean | null {
    return this._recovered;
  }

  /**
   * The last message seen, the next connection's `recover=<epoch>:<offset>`; null before Pier gave
   * one, when history is off, and after a connection without recovery delivered anything (an older
   * edge: which kept messages it delivered is unknown, and asking from the old position would
   * deliver them twice).
   */
  get position(): GatewayPosition | null {
    return this._position && { ...this._position };
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
    const recover = this.options.recover ?? true;
    const socket = make(recover ? recoverUrl(this.url, this._position) : this.url);
    this.socket = socket;
    this.frameMode = recover ? 'deciding' : 'raw';
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
      this.frame(data);
    };
    socket.onerror = () => undefined; // the close that follows says everything
    socket.onclose = (ev) => this.ended(socket, ev.code, ev.reason);
  }

  /** One frame of the current socket (not the pong), parsed, read as its mode says. */
  private frame(data: unknown): void {
    if (this.frameMode === 'deciding') {
      const info = recoveryInfo(data);
      if (info) {
        this.frameMode = 'wrapped';
        return this.recovery(info);
      }
      // An edge that ignored `recover`: this connection's frames are the app's, as before.
      this.frameMode = 'raw';
      this._position = null;
    }
    if (this.frameMode === 'raw' || !isObject(data) || data.event !== MESSAGE_EVENT || !isObject(data.data) || !('payload' in data.data)) {
      // A connection without recovery, or a frame Pier did not wrap as a message (something a later
      // edge adds, or malformed): handed on as it is, as without recovery.
      return this.emit('message', data);
    }
    const { offset, payload } = data.data;
    if (isOffset(offset) && this._position) {
      // Offsets grow within an epoch: one at or below the last seen was delivered already.
      if (offset <= this._position.offset) return;
      this._position = { epoch: this._position.epoch, offset };
    }
    // Not kept (sent to one connection, too large, history off): no offset, nothing to remember.
    this.emit('message', payload);
  }

  private recovery(info: RecoveryInfo): void {
    this._recovered = info.recovered;
    this._position = positionAfter(info, this._position);
    this.emit('recovery', { ...info });
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

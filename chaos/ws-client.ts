import WebSocket from 'ws';
import type { History } from './history.js';

/** The upgrade's own deadline (ws's handshakeTimeout) and a client close's wait for the server's answer. */
const HANDSHAKE_MS = 5_000;
const CLOSE_MS = 5_000;

export interface Endpoint {
  port: number;
  host: string;
  token: string;
}

/**
 * One browser connection of the ws workload, recording itself in the history: `connect` (invoke,
 * then ok, fail for a 4xx refusal, unknown for anything else), `send` before each frame (and
 * `send error` when the socket would not write it), `close` (invoke, then ok with the code or
 * unknown when no answer came) when this side closes it, `break` when it was closed under it.
 * One client is one connection: a reconnect is a new client.
 */
export class WsClient {
  private ws: WebSocket | null = null;
  private seq = 0;
  private closing = false;
  /** Resolves when the connection is over, however it ended. */
  ended: Promise<void> = Promise.resolve();
  broken = false;

  constructor(
    readonly id: string,
    private readonly history: History,
  ) {}

  get live(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN && !this.closing && !this.broken;
  }

  /** Resolves true when open; false when refused or failed (recorded either way). */
  async connect(to: Endpoint, fields: Record<string, unknown> = {}): Promise<boolean> {
    const op = this.history.invoke('ws', 'connect', { client: this.id, ...fields });
    const ws = new WebSocket(`ws://127.0.0.1:${to.port}/ws`, {
      headers: { host: to.host, 'x-authorization': to.token, 'user-agent': `pier-chaos ${this.id}` },
      handshakeTimeout: HANDSHAKE_MS,
    });
    const outcome = await new Promise<{ ok: true } | { ok: false; status?: number; error: string }>((resolve) => {
      // A last resort beyond ws's own handshake timeout: the outcome is never waited on forever.
      const guard = setTimeout(() => resolve({ ok: false, error: 'no outcome in time' }), HANDSHAKE_MS * 2);
      const done = (v: { ok: true } | { ok: false; status?: number; error: string }) => {
        clearTimeout(guard);
        resolve(v);
      };
      ws.once('open', () => done({ ok: true }));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => done({ ok: false, status: res.statusCode, error: body.slice(0, 300) }));
        res.on('error', () => done({ ok: false, status: res.statusCode, error: 'response broken' }));
      });
      ws.once('error', (err) => done({ ok: false, error: err.message }));
    });
    if (!outcome.ok) {
      ws.on('error', () => undefined);
      ws.terminate();
      const status = outcome.status;
      if (status !== undefined && status >= 400 && status < 500) this.history.fail('ws', 'connect', op, { client: this.id, status, error: outcome.error });
      else this.history.unknown('ws', 'connect', op, { client: this.id, ...(status === undefined ? {} : { status }), error: outcome.error });
      return false;
    }
    this.ws = ws;
    this.history.ok('ws', 'connect', op, { client: this.id });
    ws.on('error', () => undefined);
    this.ended = new Promise((resolve) => {
      ws.once('close', (code, reason) => {
        if (!this.closing) {
          this.broken = true;
          this.history.info('ws', 'break', { client: this.id, code, reason: reason.toString().slice(0, 200) });
        }
        resolve();
      });
    });
    return true;
  }

  /** Sends the next numbered message: `{event: "chaos", data: {client, seq}}`. */
  send(): void {
    if (!this.live) return;
    const seq = ++this.seq;
    this.history.info('ws', 'send', { client: this.id, seq });
    this.ws!.send(JSON.stringify({ event: 'chaos', data: { client: this.id, seq } }), (err) => {
      if (err) this.history.info('ws', 'send error', { client: this.id, seq, error: err.message });
    });
  }

  /** Closes it from this side (1000) and waits, bounded, for the server's answer. */
  async close(): Promise<void> {
    const ws = this.ws;
    if (!ws || this.closing || this.broken || ws.readyState !== WebSocket.OPEN) return;
    this.closing = true;
    const op = this.history.invoke('ws', 'close', { client: this.id });
    const answer = await new Promise<{ code: number } | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), CLOSE_MS);
      ws.once('close', (code) => {
        clearTimeout(timer);
        resolve({ code });
      });
      ws.close(1000, 'done');
    });
    if (answer) this.history.ok('ws', 'close', op, { client: this.id, code: answer.code });
    else {
      ws.terminate();
      this.history.unknown('ws', 'close', op, { client: this.id, error: `no close answer in ${CLOSE_MS} ms` });
    }
  }

  /** Drops the socket without a close frame (the runner's last resort). */
  terminate(): void {
    this.ws?.terminate();
  }
}

import { randomBytes } from 'node:crypto';
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

/** Where a recovering client stands in its user's history: the recovery frame's epoch, the last offset seen (docs/protocol.md "History and recovery"). */
export interface Position {
  epoch: string;
  offset: number;
}

/** How a connection reads its frames: waiting for the first, wrapped (after a recovery frame), or raw (an edge that ignored `recover`). */
type FrameMode = 'deciding' | 'wrapped' | 'raw';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isOffset = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
/** The broadcast payload's id and user (`{chaos: 'broadcast', id, user}`, chaos/workloads/ws.ts), when it is one. */
function payloadFields(payload: unknown): Record<string, unknown> {
  if (!isObject(payload) || payload.chaos !== 'broadcast') return { odd: JSON.stringify(payload)?.slice(0, 200) ?? 'undefined' };
  return { pid: payload.id, user: payload.user };
}

/**
 * One browser connection of the ws workload, recording itself in the history: `connect` (invoke,
 * then ok, fail for a 4xx refusal, unknown for anything else), `send` before each frame (and
 * `send error` when the socket would not write it), `close` (invoke, then ok with the code or
 * unknown when no answer came) when this side closes it, `break` when it was closed under it.
 * One client is one connection: a reconnect is a new client.
 *
 * A client made with `recover` opts in to gateway history as the SDK does (docs/protocol.md
 * "History and recovery"): `?recover=` with no position, or `?recover=<epoch>:<offset>` with the
 * position its predecessor ended at, and records what the server sends: `recovery` info `{client,
 * recovered, epoch, offset, missed, reason}` for the recovery frame, `frame` info `{client, offset,
 * pid, user}` for each app message (`raw: true` when the edge did not wrap it, `odd` for anything
 * that is not a broadcast of the workload). `position` follows the SDK's rules, for the next client.
 */
export class WsClient {
  private ws: WebSocket | null = null;
  private seq = 0;
  private closing = false;
  /** Resolves when the connection is over, however it ended. */
  ended: Promise<void> = Promise.resolve();
  broken = false;
  private mode: FrameMode = 'deciding';
  private _position: Position | null;

  /** `recover`: opt in to recovery, from `from` (null: no position yet); absent: a plain connection. */
  constructor(
    readonly id: string,
    private readonly history: History,
    private readonly recover: { from: Position | null } | null = null,
  ) {
    this._position = recover?.from ?? null;
  }

  /** Where the next connection should ask to recover from (the SDK's `position`): null to start over. */
  get position(): Position | null {
    return this._position && { ...this._position };
  }

  get live(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN && !this.closing && !this.broken;
  }

  /** Resolves true when open; false when refused or failed (recorded either way). */
  async connect(to: Endpoint, fields: Record<string, unknown> = {}): Promise<boolean> {
    const from = this.recover?.from;
    const query = this.recover ? `?recover=${from ? `${encodeURIComponent(from.epoch)}:${from.offset}` : ''}` : '';
    const op = this.history.invoke('ws', 'connect', { client: this.id, ...fields, ...(this.recover ? { recover: from ? `${from.epoch}:${from.offset}` : '' } : {}) });
    const ws = new WebSocket(`ws://127.0.0.1:${to.port}/ws${query}`, {
      // A trace of its own, as an instrumented page sends it: its context crosses every hop (and, in
      // an upgrade run, processes of both releases: docs/operations.md "Tracing").
      headers: { host: to.host, 'x-authorization': to.token, 'user-agent': `pier-chaos ${this.id}`, traceparent: `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01` },
      handshakeTimeout: HANDSHAKE_MS,
    });
    // Before the open: nothing the server sends after its 101 is missed.
    ws.on('message', (data, isBinary) => this.frame(isBinary ? null : data.toString()));
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

  /** One frame from the server, recorded; the position follows it as the SDK's does. */
  private frame(text: string | null): void {
    if (!this.recover) return;
    let data: unknown = text;
    try {
      data = text === null ? null : JSON.parse(text);
    } catch {
      // recorded as odd below
    }
    if (this.mode === 'deciding') {
      if (isObject(data) && data.event === 'pier.recovery' && isObject(data.data)) {
        this.mode = 'wrapped';
        const d = data.data;
        const epoch = typeof d.epoch === 'string' ? d.epoch : null;
        const offset = isOffset(d.offset) ? d.offset : null;
        const missed = typeof d.missed === 'number' ? d.missed : 0;
        this.history.info('ws', 'recovery', { client: this.id, recovered: d.recovered, epoch, offset, missed, ...(d.reason === undefined ? {} : { reason: d.reason }) });
        const previous = this._position;
        if (epoch === null || offset === null) this._position = null;
        else if (missed === 0) this._position = { epoch, offset };
        // The frame's offset is where the replay ends: stand before it (the SDK's rule), so a
        // connection lost during the replay asks for the rest.
        else this._position = { epoch, offset: previous?.epoch === epoch && previous.offset <= offset ? previous.offset : 0 };
        return;
      }
      // An edge that ignored `recover`: its frames are the app's, as before, and the position is forgotten.
      this.mode = 'raw';
      this._position = null;
    }
    if (this.mode === 'raw') {
      this.history.info('ws', 'frame', { client: this.id, raw: true, ...payloadFields(data) });
      return;
    }
    if (!isObject(data) || data.event !== 'pier.message' || !isObject(data.data)) {
      this.history.info('ws', 'frame', { client: this.id, odd: (text ?? '<binary>').slice(0, 200) });
      return;
    }
    const offset = data.data.offset;
    this.history.info('ws', 'frame', { client: this.id, ...(offset === undefined ? {} : { offset }), ...payloadFields(data.data.payload) });
    if (isOffset(offset) && this._position && offset > this._position.offset) this._position = { epoch: this._position.epoch, offset };
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

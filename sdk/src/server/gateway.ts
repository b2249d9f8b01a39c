import { traceHeaders } from './trace.js';
import { errorFromAnswer, NetworkError, readJson } from '../errors.js';

export interface ConnectionInfo {
  id: string;
  userAgent: string;
}

/** One user's connections, as `GET /runtime/ws/conn/list` answers them in `data`. */
export interface ListedUser {
  name: string;
  conns: ConnectionInfo[];
}

export interface ConnectionList {
  users: ListedUser[];
  /** A gateway replica did not answer in time: the list may miss its connections. */
  partial: boolean;
}

/** Who a message goes to: one connection, or every connection of some users. */
export type SendTarget = { connId: string } | { users: string[] };

/** What `POST /runtime/ws/conn/send` answers: where the message went, and whether history kept it. */
export interface SendReceipt {
  /** Connections it was sent to. */
  delivered: number;
  /**
   * True when it is in each named user's history, so a page that reconnects gets it; false for a
   * `connId` target, history off, a message too large to keep, or a Pier without history.
   */
  kept: boolean;
  /** With `kept`: its offset in `epoch`, the same for every user named. */
  offset?: number;
  epoch?: string;
}

/**
 * The gateway's local API (docs/protocol.md "Gateway"), as one app. Sends the app's key and secret on
 * every call (shared mode); a sidecar ignores them.
 */
export class GatewayClient {
  constructor(
    private readonly baseUrl: string,
    private readonly appKey: string,
    private readonly appSecret: string,
    private readonly timeoutMs: number,
  ) {}

  /** Sends `payload` (any JSON) as one text frame; answers how many connections it was sent to. */
  async send(target: SendTarget, payload: unknown): Promise<number> {
    return (await this.sendWithReceipt(target, payload)).delivered;
  }

  /**
   * As `send`, answering Pier's whole receipt: also whether the message was kept in the users'
   * history (and under which offset and epoch). With history on but its store unreachable, Pier
   * sends nothing and this throws a `ServerError` (503).
   */
  async sendWithReceipt(target: SendTarget, payload: unknown): Promise<SendReceipt> {
    const body = 'connId' in target ? { payload, conn_id: target.connId } : { payload, users: target.users };
    const data = (await this.post('/runtime/ws/conn/send', body)) as { delivered: number; kept?: unknown; offset?: unknown; epoch?: unknown };
    // A Pier from before history answers `delivered` alone: nothing of it was kept.
    const receipt: SendReceipt = { delivered: data.delivered, kept: data.kept === true };
    if (receipt.kept && typeof data.offset === 'number') receipt.offset = data.offset;
    if (receipt.kept && typeof data.epoch === 'string') receipt.epoch = data.epoch;
    return receipt;
  }

  /** Closes the union of `conns` and the connections of `users`; answers how many were closed. */
  async close(target: { conns?: string[]; users?: string[] }): Promise<number> {
    return ((await this.post('/runtime/ws/conn/close', target)) as { closed: number }).closed;
  }

  /** The app's live connections, across every gateway replica. */
  async list(): Promise<ConnectionList> {
    const answer = (await this.request('GET', '/runtime/ws/conn/list')) as { data: ListedUser[]; partial?: boolean };
    return { users: answer.data, partial: answer.partial === true };
  }

  private async post(path: string, body: unknown): Promise<unknown> {
    return ((await this.request('POST', path, body)) as { data: unknown }).data;
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: { ...traceHeaders(), 'content-type': 'application/json', 'x-app-key': this.appKey, 'x-app-secret': this.appSecret },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new NetworkError(`the gateway at ${this.baseUrl} did not answer`, { cause: err });
    }
    const answer = await readJson(res);
    if (!res.ok || (answer as { code?: unknown })?.code !== 0) throw errorFromAnswer(res.ok ? 502 : res.status, answer, `gateway ${path}`);
    return answer;
  }
}

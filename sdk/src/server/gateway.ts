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
    const body = 'connId' in target ? { payload, conn_id: target.connId } : { payload, users: target.users };
    return ((await this.post('/runtime/ws/conn/send', body)) as { delivered: number }).delivered;
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
        headers: { 'content-type': 'application/json', 'x-app-key': this.appKey, 'x-app-secret': this.appSecret },
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

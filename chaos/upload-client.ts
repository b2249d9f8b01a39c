import { Agent, request } from 'undici';
import { multipart } from '../test/helpers/upload-client.js';

/**
 * How one request to the upload listener ended, in the history's terms: `ok` (2xx with code 0),
 * `fail` (a 4xx: refused, no effect), `unknown` (no answer in time, a network error, a 5xx).
 */
export type Outcome =
  | { phase: 'ok'; status: number; json: any }
  | { phase: 'fail'; status: number; json: any }
  | { phase: 'unknown'; status?: number; error: string };

/** The upload listener through haproxy, as one user of one app, every request with a deadline. */
export class ChaosUploadClient {
  private readonly agent = new Agent({ keepAliveTimeout: 2_000, connections: 8 });

  constructor(
    private readonly base: string,
    private readonly host: string,
    private readonly token: string,
  ) {}

  private async send(method: 'POST' | 'PATCH' | 'GET', path: string, timeoutMs: number, parts?: Array<[string, string | Buffer]>): Promise<Outcome> {
    const mp = parts ? multipart(parts) : null;
    try {
      const res = await request(`${this.base}${path}`, {
        dispatcher: this.agent,
        method,
        headers: { host: this.host, 'x-authorization': this.token, ...(mp ? { 'content-type': mp.contentType } : {}) },
        body: mp?.body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await res.body.text();
      let json: any;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = { unparsed: text.slice(0, 200) };
      }
      if (res.statusCode >= 200 && res.statusCode < 300 && json?.code === 0) return { phase: 'ok', status: res.statusCode, json };
      if (res.statusCode >= 400 && res.statusCode < 500) return { phase: 'fail', status: res.statusCode, json };
      return { phase: 'unknown', status: res.statusCode, error: `HTTP ${res.statusCode}: ${JSON.stringify(json)?.slice(0, 300)}` };
    } catch (err) {
      const e = err as Error & { code?: string; cause?: { code?: string } };
      return { phase: 'unknown', error: `${e.name}: ${e.code ?? e.cause?.code ?? ''} ${e.message}`.slice(0, 300) };
    }
  }

  create(fields: Record<string, string | number>, timeoutMs: number): Promise<Outcome> {
    return this.send('POST', '/upload/', timeoutMs, Object.entries(fields).map(([k, v]) => [k, String(v)]));
  }

  /** `upload_offset` first: the server checks it before a byte is written. */
  patch(id: string, offset: number, chunk: Buffer, timeoutMs: number): Promise<Outcome> {
    return this.send('PATCH', `/upload/${encodeURIComponent(id)}`, timeoutMs, [['upload_offset', String(offset)], ['file', chunk]]);
  }

  get(id: string, timeoutMs: number): Promise<Outcome> {
    return this.send('GET', `/upload/${encodeURIComponent(id)}`, timeoutMs);
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

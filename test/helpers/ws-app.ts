import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { until } from './wait.js';

export interface Callback {
  body: { data: unknown; action: 'open' | 'message' | 'close'; user_name: string; conn_id: string };
  raw: string;
  headers: IncomingHttpHeaders;
  url: string;
}

export interface AppBehaviour {
  /** Milliseconds to wait before answering (drawn per request). */
  delay?: () => number;
  /** Answer 500 instead of 200 (drawn per request). */
  fail?: () => boolean;
}

/**
 * A real HTTP server playing an app's backend: records every gateway callback it accepts (2xx),
 * in arrival order. Refused attempts (500) are counted, not recorded.
 */
export class WsApp {
  readonly accepted: Callback[] = [];
  refused = 0;
  private constructor(
    private readonly server: Server,
    public behaviour: AppBehaviour,
  ) {}

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  static async start(behaviour: AppBehaviour = {}): Promise<WsApp> {
    const server = createServer();
    const app = new WsApp(server, behaviour);
    server.on('request', (req, res) => {
      let raw = '';
      req.on('data', (d) => (raw += d));
      req.on('end', () => {
        const answer = () => {
          if (app.behaviour.fail?.()) {
            app.refused++;
            res.writeHead(500).end();
            return;
          }
          app.accepted.push({ body: JSON.parse(raw), raw, headers: req.headers, url: req.url! });
          res.writeHead(200).end('ok');
        };
        const d = app.behaviour.delay?.() ?? 0;
        if (d > 0) setTimeout(answer, d);
        else answer();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return app;
  }

  of(connId: string): Callback[] {
    return this.accepted.filter((c) => c.body.conn_id === connId);
  }

  /** Resolves when `cond` holds (polled), or fails after `timeoutMs` saying what it waited for. */
  async until(cond: (app: WsApp) => boolean, what = "the app's callbacks to match", timeoutMs = 10_000): Promise<void> {
    await until(what, () => cond(this), timeoutMs, 20);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/**
 * What an app does with `X-Pier-Signature: t=<seconds>,v1=<hex>`, by hand (docs/gateway.md): derive
 * its callback key `HMAC-SHA256(app secret, "pier callback key v1")` (hex), recompute the HMAC over
 * `<t>.<event id>.<raw body>` with it, and refuse it when it differs or `t` is outside its window.
 */
export function verifySignature(c: Callback, secret: string, windowSeconds = 300, nowSeconds = Math.floor(Date.now() / 1000)): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(c.headers['x-pier-signature'] ?? ''));
  if (!m) return false;
  const callbackKey = createHmac('sha256', secret).update('pier callback key v1').digest('hex');
  const expected = createHmac('sha256', callbackKey).update(`${m[1]}.${c.headers['x-pier-event-id']}.${c.raw}`).digest('hex');
  return timingSafeEqual(Buffer.from(expected), Buffer.from(m[2])) && Math.abs(nowSeconds - Number(m[1])) <= windowSeconds;
}

export function wsManifest(name: string, port: number, url = '/ws/message'): string {
  return `metadata: { name: ${name} }\noptions:\n  websocket: { url: ${url}, port: ${port} }\n`;
}

import WebSocket from 'ws';

export interface Client {
  ws: WebSocket;
  received: string[];
  closed: Promise<{ code: number; reason: string }>;
}

/** Opens a browser-like WebSocket to the gateway; rejects with the HTTP status when refused. */
export function connect(port: number, host: string, headers: Record<string, string> = {}, path = '/ws'): Promise<Client> {
  return open(new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { host, ...headers } }));
}

/**
 * `wss://<host>:<port>/ws` as a browser opens it: the host name in SNI and Host, resolved to this
 * machine, the server's certificate checked against `ca`.
 */
export function connectSecure(port: number, host: string, ca: Buffer, headers: Record<string, string> = {}): Promise<Client> {
  return open(new WebSocket(`wss://${host}:${port}/ws`, { ca, headers, lookup: localLookup as never }));
}

/** A DNS lookup that resolves every name to this machine (`*.alice.localhost` included). */
export function localLookup(_host: string, options: { all?: boolean }, cb: (...args: unknown[]) => void): void {
  if (options?.all) cb(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
}

function open(ws: WebSocket): Promise<Client> {
  return new Promise((resolve, reject) => {
    const received: string[] = [];
    let onClose!: (v: { code: number; reason: string }) => void;
    const closed = new Promise<{ code: number; reason: string }>((r) => (onClose = r));
    ws.on('message', (m) => received.push(String(m)));
    ws.on('close', (code, reason) => onClose({ code, reason: String(reason) }));
    ws.on('open', () => resolve({ ws, received, closed }));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
    });
    ws.on('error', (err) => reject(err));
  });
}

export async function refusal(port: number, host: string, headers: Record<string, string> = {}): Promise<number> {
  try {
    const c = await connect(port, host, headers);
    c.ws.close();
    return 101;
  } catch (err) {
    return (err as { status?: number }).status ?? -1;
  }
}

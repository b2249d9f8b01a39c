import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * A real HTTP server playing the provider app. Routes:
 * - `/echo`: answers 201 with a custom header and a JSON description of what it received;
 * - `/bytes`: answers `size` random bytes (query), with `x-body-sha256` of what it received;
 * - `/big`: declares and sends 9 MiB;  `/slow`: never answers;
 * - `/v1/thing`: a v1 provider answering JSON;  `/v1/bad`: answers non-JSON;  `/v1/fail`: answers 500.
 */
export class ProviderServer {
  readonly seen: Seen[] = [];
  private constructor(private readonly server: Server) {}

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  static async start(): Promise<ProviderServer> {
    const server = createServer();
    const p = new ProviderServer(server);
    server.on('request', (req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => {
        const body = Buffer.concat(parts);
        p.seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        const url = new URL(req.url!, 'http://x');
        switch (url.pathname) {
          case '/echo':
            res.writeHead(201, { 'content-type': 'application/json', 'x-provider': 'notes', 'cache-control': 'no-store' });
            res.end(JSON.stringify({ method: req.method, url: req.url, contentType: req.headers['content-type'] ?? null, body: body.toString('utf8') }));
            return;
          case '/bytes': {
            const size = Number(url.searchParams.get('size'));
            const out = Buffer.alloc(size);
            for (let i = 0; i < size; i += 4096) out.writeUInt32LE((i * 2654435761) >>> 0, i);
            res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-body-sha256': createHash('sha256').update(body).digest('hex'), 'x-answer-sha256': createHash('sha256').update(out).digest('hex') });
            res.end(out);
            return;
          }
          case '/big':
            res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(9 * 1024 * 1024) });
            res.end(Buffer.alloc(9 * 1024 * 1024));
            return;
          case '/slow':
            return; // never answers
          case '/cut':
            // Headers and the start of a small answer, then the connection dies.
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
            res.write('{"partial":');
            setTimeout(() => res.socket?.destroy(), 50);
            return;
          case '/cut-big':
            // A large answer (past what Pier holds in one piece) cut in its middle.
            res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(4 * 1024 * 1024) });
            res.write(Buffer.alloc(1024 * 1024, 1));
            setTimeout(() => res.socket?.destroy(), 50);
            return;
          case '/stall':
            // Headers and the start of a small answer, then silence.
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
            res.write('{"partial":');
            return;
          case '/v1/thing':
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ thing: 42, got: JSON.parse(body.toString('utf8')) }));
            return;
          case '/v1/bad':
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.end('not json');
            return;
          case '/v1/fail':
            res.writeHead(500);
            res.end();
            return;
          default:
            res.writeHead(404);
            res.end();
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return p;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

export function providerDoc(user: string, name: string, port: number, o: { version: 'v1' | 'v2'; dataType: string; group: string; ops: Record<string, string> }): string {
  const ops = Object.entries(o.ops).map(([n, uri]) => `    - { name: ${n}, uri: "${uri}" }`).join('\n');
  return `apiVersion: sys.example.com/v1alpha1
kind: ProviderRegistry
metadata: { name: ${name}, namespace: user-system-${user} }
spec:
  version: ${o.version}
  kind: provider
  dataType: ${o.dataType}
  group: ${o.group}
  endpoint: "127.0.0.1:${port}"
  opApis:
${ops}
`;
}

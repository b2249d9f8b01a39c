import { createServer } from 'node:http';

/**
 * An OTLP/HTTP collector's first step, for benchmarks: takes `/v1/traces` posts, counts their spans,
 * answers 200. It runs on the load generator's core (tracing.ts), so what Pier's export costs is
 * Pier's CPU, not the collector's. Prints its port, then answers `count` on stdin with the spans seen.
 */
let spans = 0;
const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (d: Buffer) => parts.push(d));
  req.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: unknown[] }> }> };
      for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans += ss.spans?.length ?? 0;
    } catch {
      // a body that is not OTLP JSON counts nothing
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));
process.stdin.on('data', () => process.stdout.write(`${spans}\n`));

import { createServer } from 'node:http';

/** A provider for benchmarks, in its own process: answers every request with a 1 KiB body. */
const answer = Buffer.alloc(1024, 'x');
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': answer.length });
    res.end(answer);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));

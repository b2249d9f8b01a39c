import { createServer } from 'node:http';

/**
 * The app of `npm run bench -- c100k`, in its own process: every gateway callback is answered 200
 * at once; `open` callbacks are counted (GET /count), so the bench knows when the storm of 100,000
 * opens has been delivered and the system is idle again.
 */
let opens = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET') return void res.writeHead(200).end(String(opens));
  let raw = '';
  req.on('data', (d) => (raw += d));
  req.on('end', () => {
    res.writeHead(200).end();
    if (raw.includes('"action":"open"')) opens++;
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));

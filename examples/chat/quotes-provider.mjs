// The provider app of the example: answers `random` with a quote. Pier forwards v2 calls to it
// unchanged and adds who called (X-Pier-Caller) and for which user (X-Bfl-User).
import { createServer } from 'node:http';

const QUOTES = [
  'Simplicity is prerequisite for reliability. (Dijkstra)',
  'Make it work, make it right, make it fast. (Kent Beck)',
  'The cheapest, fastest and most reliable components are those that are not there. (Gordon Bell)',
];

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url?.startsWith('/quotes/random')) {
      const quote = QUOTES[Math.floor(Math.random() * QUOTES.length)];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ quote, for: req.headers['x-bfl-user'], caller: req.headers['x-pier-caller'] }));
    } else {
      res.writeHead(404).end();
    }
  });
});
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));

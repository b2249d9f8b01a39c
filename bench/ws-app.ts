import { createServer } from 'node:http';
import { Pool } from 'undici';

/**
 * The app of the WebSocket benchmark, in its own process: each `message` callback is answered
 * 200 at once, then echoed to its connection through the local send API (as a real app would).
 * argv: <local API port> <app key> <app secret>
 */
const [localPort, key, secret] = process.argv.slice(2);
const api = new Pool(`http://127.0.0.1:${localPort}`, { connections: 32 });
const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (d) => (raw += d));
  req.on('end', () => {
    res.writeHead(200).end();
    const ev = JSON.parse(raw);
    if (ev.action !== 'message') return;
    void api
      .request({ path: '/runtime/ws/conn/send', method: 'POST', headers: { 'x-app-key': key, 'x-app-secret': secret }, body: JSON.stringify({ conn_id: ev.conn_id, payload: ev.data.data }) })
      .then((r) => r.body.dump());
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));

import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { Pool } from 'undici';

/**
 * The app of the WebSocket benchmark, in its own process: each `message` callback is answered
 * 200 at once, then echoed through the local send API (as a real app would): an `rt` event to its
 * connection (`conn_id`), an `rt-user` event to its user (`users`, what gateway history keeps),
 * with the credentials of that user's install when a map of them is given.
 * argv: <local API port> <app key> <app secret> [JSON file: {user: {OS_APP_KEY, OS_APP_SECRET}}]
 */
const [localPort, key, secret, credsFile] = process.argv.slice(2);
const byUser = (credsFile ? JSON.parse(readFileSync(credsFile, 'utf8')) : {}) as Record<string, { OS_APP_KEY: string; OS_APP_SECRET: string }>;
const api = new Pool(`http://127.0.0.1:${localPort}`, { connections: 32 });
const server = createServer((req, res) => {
  let raw = '';
  req.on('data', (d) => (raw += d));
  req.on('end', () => {
    res.writeHead(200).end();
    const ev = JSON.parse(raw);
    if (ev.action !== 'message') return;
    const toUser = ev.data.event === 'rt-user';
    const creds = toUser ? byUser[ev.user_name] : undefined;
    const headers = creds ? { 'x-app-key': creds.OS_APP_KEY, 'x-app-secret': creds.OS_APP_SECRET } : { 'x-app-key': key, 'x-app-secret': secret };
    const body = toUser ? { users: [ev.user_name], payload: ev.data.data } : { conn_id: ev.conn_id, payload: ev.data.data };
    void api.request({ path: '/runtime/ws/conn/send', method: 'POST', headers, body: JSON.stringify(body) }).then((r) => r.body.dump());
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));

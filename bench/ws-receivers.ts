import { createInterface } from 'node:readline';
import WebSocket from 'ws';

/**
 * A broadcast receiver process (load side): opens `count` WebSockets to `url` with the given
 * headers, counts every message, prints `ready` once all are open, then answers each `count` line
 * on stdin with the total so far; `close` ends it. Several of these share the receiving work, so
 * the load generator is not what limits a broadcast figure.
 */
const [url, countText, headersJson] = process.argv.slice(2);
const headers = JSON.parse(headersJson) as Record<string, string>;
let received = 0;
const sockets: WebSocket[] = [];
const open = () =>
  new Promise<void>((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.on('message', () => received++);
    sockets.push(ws);
  });
const total = Number(countText);
for (let i = 0; i < total; i += 100) await Promise.all(Array.from({ length: Math.min(100, total - i) }, open));
process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'count') process.stdout.write(`${received}\n`);
  if (line === 'close') break;
}
for (const ws of sockets) ws.terminate();
process.exit(0);

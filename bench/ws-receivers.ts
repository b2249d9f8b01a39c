import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { frameReader } from './frames.js';

/**
 * A broadcast receiver process (load side): opens `count` WebSockets to `url` with the given
 * headers and counts the frames it receives, reading only their headers (no payload is decoded or
 * copied), so that receiving costs far less than sending and the server is what a broadcast figure
 * measures. Prints `ready` once all are open, then answers each `count` line on stdin with the
 * total so far; `close` ends it.
 */
const [url, countText, headersJson] = process.argv.slice(2);
const target = new URL(url);
const extra = JSON.parse(headersJson) as Record<string, string>;
let frames = 0;
const sockets: Socket[] = [];

/** Counts frames in a byte stream (their headers read, payloads skipped). */
const frameCounter = () => frameReader(() => frames++);

function open(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    sockets.push(socket);
    socket.once('error', reject);
    socket.once('connect', () => {
      const headers = { Host: target.host, Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': randomBytes(16).toString('base64'), 'Sec-WebSocket-Version': '13', ...extra };
      socket.write(`GET ${target.pathname} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
    });
    /** The HTTP answer until it is complete; null after (frames only). */
    let head: Buffer | null = Buffer.alloc(0);
    const count = frameCounter();
    const onData = (d: Buffer) => {
      if (head !== null) {
        head = Buffer.concat([head, d]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!head.subarray(0, 12).toString().includes('101')) return reject(new Error(head.subarray(0, end).toString()));
        const rest = head.subarray(end + 4);
        head = null;
        resolve();
        if (rest.length > 0) count(rest);
        return;
      }
      count(d);
    };
    socket.on('data', onData);
  });
}

const total = Number(countText);
for (let i = 0; i < total; i += 100) await Promise.all(Array.from({ length: Math.min(100, total - i) }, open));
process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'count') process.stdout.write(`${frames}\n`);
  if (line === 'close') break;
}
for (const s of sockets) s.destroy();
process.exit(0);

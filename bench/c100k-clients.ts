import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { frameReader } from './frames.js';

/**
 * One load-side process of `npm run bench -- c100k`: opens its share of the WebSockets with raw
 * sockets (no WebSocket library: a connection costs a socket and a few closures), each from one of
 * several 127.0.0.x source addresses (one address has ~28,000 ephemeral ports). It reads only frame
 * headers: it counts data frames on the watched connections and times pongs.
 * argv[2]: JSON { port, groups: [{ path, headers, count, watch }], sources: string[] }.
 * stdout: `open <ms>` when all are open (or `failed <message>`); then answers, on stdin,
 * `count` (data frames on watched connections so far), `ping N [SPREAD]` (JSON: pong latencies of N distinct
 * random connections, ms, and how many got none within 10 s; all at once, or evenly over SPREAD ms) and `close`.
 */
interface Group {
  path: string;
  headers: Record<string, string>;
  count: number;
  watch: boolean;
}
const spec = JSON.parse(process.argv[2]!) as { port: number; groups: Group[]; sources: string[] };
const sockets: Socket[] = [];
let frames = 0;
const pongWaiters = new Map<Socket, () => void>();

function open(group: Group, source: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port: spec.port, host: '127.0.0.1', localAddress: source });
    sockets.push(socket);
    socket.once('error', reject);
    socket.once('connect', () => {
      const headers = { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': randomBytes(16).toString('base64'), 'Sec-WebSocket-Version': '13', ...group.headers };
      socket.write(`GET ${group.path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
    });
    let head: Buffer | null = Buffer.alloc(0);
    const read = frameReader((opcode) => {
      if (opcode === 0x0a) pongWaiters.get(socket)?.();
      else if (group.watch && (opcode === 0x01 || opcode === 0x02)) frames++;
    });
    socket.on('data', (d: Buffer) => {
      if (head === null) return read(d);
      head = Buffer.concat([head, d]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!head.subarray(0, 12).toString().includes(' 101')) return reject(new Error(head.subarray(0, Math.min(end, 300)).toString()));
      const rest = head.subarray(end + 4);
      head = null;
      resolve();
      if (rest.length > 0) read(rest);
    });
  });
}

/** A masked ping frame with no payload (client frames must be masked). */
const PING = Buffer.from([0x89, 0x80, 0, 0, 0, 0]);

/** One ping's pong latency (ms), or null when none came within 10 s. */
function pingOne(s: Socket): Promise<number | null> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const timer = setTimeout(() => (pongWaiters.delete(s), resolve(null)), 10_000);
    pongWaiters.set(s, () => {
      clearTimeout(timer);
      pongWaiters.delete(s);
      resolve(performance.now() - t0);
    });
    s.write(PING);
  });
}

/**
 * Pings n distinct random connections: all in one burst (`spreadMs` 0), or one every
 * spreadMs / n ms. A burst times this process as much as the server: its pongs are read one by
 * one on the load core, behind the other processes' bursts.
 */
async function ping(n: number, spreadMs: number): Promise<{ latencies: number[]; lost: number }> {
  const unique = new Set<Socket>();
  while (unique.size < Math.min(n, sockets.length)) unique.add(sockets[Math.floor(Math.random() * sockets.length)]!);
  const gapMs = spreadMs / unique.size;
  const answers = await Promise.all(
    [...unique].map((s, i) => (gapMs === 0 ? pingOne(s) : new Promise<void>((r) => setTimeout(r, i * gapMs)).then(() => pingOne(s)))),
  );
  const latencies = answers.filter((a): a is number => a !== null);
  return { latencies, lost: unique.size - latencies.length };
}

const t0 = performance.now();
try {
  let k = 0;
  for (const group of spec.groups) {
    // 200 handshakes in flight at a time from this process.
    for (let i = 0; i < group.count; i += 200) {
      await Promise.all(Array.from({ length: Math.min(200, group.count - i) }, () => open(group, spec.sources[k++ % spec.sources.length]!)));
    }
  }
  process.stdout.write(`open ${Math.round(performance.now() - t0)}\n`);
} catch (err) {
  process.stdout.write(`failed ${String((err as Error).message).split('\n')[0]}\n`);
}
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'count') process.stdout.write(`${frames}\n`);
  else if (line.startsWith('ping ')) {
    const [n, spreadMs] = line.slice(5).split(' ').map(Number);
    process.stdout.write(`${JSON.stringify(await ping(n!, spreadMs ?? 0))}\n`);
  }
  else if (line === 'close') break;
}
for (const s of sockets) s.destroy();
process.exit(0);

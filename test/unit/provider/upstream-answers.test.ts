import test from 'ava';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { PierError } from '../../../bus/errors.js';
import { Upstream, type UpstreamInit } from '../../../actors/provider/upstream.js';
import { AddressPolicy } from '../../../lib/policy/address-policy.js';

// How Upstream.send reads a provider's answer (its own dispatch handler, not undici's request()):
// whole when it ends within holdBytes, else a stream read at its reader's pace; the size cap, cuts
// and silences fail it as PierErrors.

const MiB = 1024 * 1024;
let server: Server;
let origin: string;
const upstream = new Upstream(new AddressPolicy(() => new Set(), null));
/** Bytes the huge answer has handed to its socket so far. */
const seen = { hugeFlushed: 0 };
/** Whether the watched answer's connection closed before the answer was all written (settled when it closes). */
let watchedClosed: (early: boolean) => void;
const watched = new Promise<boolean>((r) => (watchedClosed = r));

/** Writes `total` bytes in 64 KiB pieces, each once the one before is flushed (the provider feels backpressure). */
function writeSlowly(res: ServerResponse, total: number, onFlushed: (n: number) => void): void {
  let sent = 0;
  const next = () => {
    if (sent >= total) return void res.end();
    const piece = Buffer.alloc(Math.min(64 * 1024, total - sent), sent / (64 * 1024));
    sent += piece.byteLength;
    res.write(piece, () => {
      onFlushed(piece.byteLength);
      next();
    });
  };
  next();
}

test.before(async () => {
  server = createServer((req, res) => {
    switch (req.url) {
      case '/small':
        res.setHeader('x-two', ['a', 'b']);
        res.writeHead(200, { 'content-type': 'text/plain' }).end('hello');
        return;
      case '/empty':
        res.writeHead(204).end();
        return;
      case '/pieces':
        // Chunked, several writes: held and joined.
        res.writeHead(200);
        res.write('ab');
        setTimeout(() => res.end('cd'), 20);
        return;
      case '/large':
        res.writeHead(200);
        writeSlowly(res, 3 * MiB, () => undefined);
        return;
      case '/huge':
        res.writeHead(200);
        writeSlowly(res, 48 * MiB, (n) => (seen.hugeFlushed += n));
        return;
      case '/declared-big':
        res.writeHead(200, { 'content-length': String(2 * MiB) });
        res.end(Buffer.alloc(2 * MiB));
        return;
      case '/growing':
        // No length declared: passes the cap as it comes.
        res.writeHead(200);
        writeSlowly(res, 2 * MiB, () => undefined);
        return;
      case '/watched':
        res.writeHead(200);
        res.on('close', () => watchedClosed(!res.writableFinished));
        writeSlowly(res, 48 * MiB, () => undefined);
        return;
      case '/cut':
        res.writeHead(200, { 'content-length': '100' });
        res.write('{"partial":');
        setTimeout(() => res.socket?.destroy(), 20);
        return;
      case '/stall':
        res.writeHead(200, { 'content-length': '100' });
        res.write('{"partial":');
        return;
      case '/silent':
        return;
      default:
        res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

test.after.always(async () => {
  await upstream.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const init = (over: Partial<UpstreamInit> = {}): UpstreamInit => ({ method: 'GET', headers: {}, body: null, timeoutMs: 2_000, holdBytes: MiB, maxBytes: 4 * MiB, ...over });
const send = (path: string, over: Partial<UpstreamInit> = {}) => upstream.send('p', { origin, path }, init(over));

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of stream) parts.push(p as Buffer);
  return Buffer.concat(parts);
}

const failure = async (p: Promise<unknown>) => {
  const err = await p.then(() => null, (e: unknown) => e);
  if (!(err instanceof PierError)) throw new Error(`not a PierError: ${String(err)}`);
  return { code: err.code, message: err.message };
};

test('a small answer is handed over whole, its headers parsed (repeated ones as a list)', async (t) => {
  const a = await send('/small');
  t.is(a.status, 200);
  t.is(a.stream, null);
  t.is(a.body!.toString(), 'hello');
  t.is(a.headers['content-type'], 'text/plain');
  t.deepEqual(a.headers['x-two'], ['a', 'b']);
  const empty = await send('/empty');
  t.is(empty.status, 204);
  t.is(empty.body!.byteLength, 0);
  t.is((await send('/pieces')).body!.toString(), 'abcd');
});

test('an answer past holdBytes is a stream of every byte, from the first', async (t) => {
  const a = await send('/large');
  t.is(a.body, null);
  const got = await readAll(a.stream!);
  t.is(got.byteLength, 3 * MiB);
  for (let off = 0; off < got.byteLength; off += 64 * 1024) t.is(got[off], (off / (64 * 1024)) & 0xff, `piece at ${off}`);
});

test('hostile: backpressure: a stream nobody reads stops the provider; read, it flows to the end', async (t) => {
  const a = await send('/huge', { maxBytes: 64 * MiB });
  // Long enough for a provider unheld to write it all; what a held one wrote stops at the buffers between.
  await new Promise((r) => setTimeout(r, 500));
  const flushed = seen.hugeFlushed;
  t.true(flushed < 24 * MiB, `the provider stopped early (${flushed} bytes flushed of 48 MiB)`);
  t.is((await readAll(a.stream!)).byteLength, 48 * MiB);
});

test('hostile: a caller gone mid-answer (the stream destroyed before its end) cuts the call to the provider', async (t) => {
  const a = await send('/watched', { maxBytes: 64 * MiB });
  a.stream!.destroy();
  t.true(await watched, 'the provider saw its connection close before it had written everything');
});

test('hostile: the size cap: declared over it, 413 before the body; passing it as it comes, the stream fails with 413', async (t) => {
  t.deepEqual(await failure(send('/declared-big', { holdBytes: 512 * 1024, maxBytes: MiB })), { code: 'PAYLOAD_TOO_LARGE', message: `answer of provider "p" is larger than ${MiB} bytes` });
  // Held whole up to the cap (the v1 shape): over it, 413 too.
  t.is((await failure(send('/growing', { holdBytes: MiB, maxBytes: MiB }))).code, 'PAYLOAD_TOO_LARGE');
  const a = await send('/growing', { holdBytes: 512 * 1024, maxBytes: MiB });
  const err = await readAll(a.stream!).then(() => null, (e: unknown) => e);
  t.true(err instanceof PierError && err.code === 'PAYLOAD_TOO_LARGE', String(err));
});

test('hostile: a cut answer is 502, a silent one (before or inside its body) 504', async (t) => {
  t.deepEqual(await failure(send('/cut')), { code: 'BAD_GATEWAY', message: 'provider "p" is unreachable: its endpoint closed the connection' });
  t.deepEqual(await failure(send('/stall', { timeoutMs: 300 })), { code: 'TIMEOUT', message: 'provider "p" did not answer within 300 ms' });
  t.is((await failure(send('/silent', { timeoutMs: 300 }))).code, 'TIMEOUT');
  t.is((await failure(send('/small', { method: 'CONNECT' }))).code, 'BAD_GATEWAY', 'never tunnelled');
  t.is((await send('/small')).body!.toString(), 'hello', 'the next call is served');
});

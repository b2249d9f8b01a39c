import test from 'ava';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { BlockPool } from '../../../edge/http/block-pool.js';
import { uploadApi, type UploadApiDeps } from '../../../edge/upload/upload-api.js';
import type { AppView } from '../../../bus/subjects.js';
import type { RegistryCache } from '../../../lib/state/registry-cache.js';
import { request, stubBus } from '../../helpers/edge-stubs.js';

// Hostile (found by a review of the pooled upload bodies): edge/upload/multipart-views.ts once held
// every pooled chunk parsed while no file part was open until the next 'field', 'file' or 'close'.
// busboy keeps nothing of what it skips (a field past fieldSize 64 in appendChunk, a preamble, a
// part without a name, bytes after the end), so a PATCH /upload/:uid of such a form kept every byte
// a client sent in memory while it was read. Here the pool's blocks still reachable mid-body are
// counted, with the pool and without it (the control).

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A pool that remembers every block it made, weakly, to count those still reachable. */
class WatchedPool extends BlockPool {
  readonly blocks: Array<WeakRef<ArrayBuffer>> = [];
  override take(): ReturnType<BlockPool['take']> {
    const made = this.made;
    const block = super.take();
    if (this.made > made) this.blocks.push(new WeakRef(block.memory.buffer as ArrayBuffer));
    return block;
  }
  alive(): number {
    return this.blocks.filter((b) => b.deref() !== undefined).length;
  }
}

const app = { id: 'alice/files', user: 'alice', name: 'files' } as AppView;
const HOST = 'files.alice.example.com';
const headers = { host: HOST, 'x-authorization': 'pier_alice', 'content-type': 'multipart/form-data; boundary=XyZ' };
const CHUNK = 256 * 1024; // what uWS hands the body stream at a time
const JUNK_MIB = 48;

const turn = () => new Promise((r) => setImmediate(r));

/**
 * Streams `head`, then JUNK_MIB MiB of `x`, through the pool the way bodyStream does, into a PATCH
 * of the multipart protocol; once busboy has parsed all of it (the body not over yet), counts the
 * pool's blocks the collector could not free. Then ends the body with `tail`.
 */
async function blocksHeld(t: Parameters<typeof stubBus>[0], head: string, tail: string, pooled: boolean) {
  const bus = stubBus(t);
  const cache = { userForToken: (tok: string) => (tok === 'pier_alice' ? 'alice' : undefined), app: (u: string, n: string) => (u === 'alice' && n === 'files' ? app : undefined) } as unknown as RegistryCache;
  const pool = new WatchedPool(2);
  const deps: UploadApiDeps = { bus, cache, domain: 'example.com', sidecarApp: null, chunkBytes: 1024, idleMs: 86_400_000, ...(pooled ? { bodyPool: pool } : {}) };
  const api = uploadApi(deps);
  const filler = pool.filler();
  const stream = new Readable({ highWaterMark: CHUNK, read() {} });
  const lent = (bytes: Uint8Array) => filler.copy(new Uint8Array(bytes).buffer); // uWS lends an ArrayBuffer
  const answer = api.append(request({ method: 'patch', headers, params: { uid: 'u1' }, stream }));
  stream.push(lent(Buffer.from(head)));
  const junk = Buffer.alloc(CHUNK, 0x78);
  for (let i = 0; i < (JUNK_MIB * 1024 * 1024) / CHUNK; i++) {
    stream.push(lent(junk));
    while (stream.readableLength > 0) await turn(); // a client as fast as the parser
  }
  for (let i = 0; i < 5; i++) await turn();
  for (let i = 0; i < 3; i++) gc();
  await turn();
  gc();
  const held = pool.alive();
  stream.push(lent(Buffer.from(tail)));
  filler.close();
  stream.push(null);
  const reply = await answer;
  return { held, made: pool.made, reply };
}

const cases: Array<[string, string, string]> = [
  ['a long field (truncated by busboy at fieldSize 64)', '--XyZ\r\nContent-Disposition: form-data; name="upload_offset"\r\n\r\n0\r\n--XyZ\r\nContent-Disposition: form-data; name="note"\r\n\r\n', '\r\n--XyZ--\r\n'],
  ['a long preamble before the first boundary', 'preamble ', '\r\n--XyZ\r\nContent-Disposition: form-data; name="upload_offset"\r\n\r\n0\r\n--XyZ--\r\n'],
  ['a part busboy skips (no Content-Disposition)', '--XyZ\r\nX-Nothing: 1\r\n\r\n', '\r\n--XyZ--\r\n'],
  ['bytes after the closing boundary', '--XyZ\r\nContent-Disposition: form-data; name="upload_offset"\r\n\r\n0\r\n--XyZ--\r\n', ''],
];

for (const [what, head, tail] of cases) {
  test(`hostile: ${what}: ${JUNK_MIB} MiB a client sends are not all kept in memory while the PATCH is read`, async (t) => {
    const baseline = await blocksHeld(t, head, tail, false);
    t.true(baseline.held <= 4, `without the pool wrapper: ${baseline.held} of ${baseline.made} blocks still reachable`);
    const pooled = await blocksHeld(t, head, tail, true);
    t.is(pooled.reply.status, 400, 'the form has no file');
    t.log(`pooled: ${pooled.held} of ${pooled.made} 1 MiB blocks reachable mid-body (baseline ${baseline.held} of ${baseline.made})`);
    t.true(pooled.held <= 4, `with the pool: ${pooled.held} MiB of the client's bytes still reachable`);
  });
}

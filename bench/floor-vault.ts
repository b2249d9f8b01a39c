import { randomBytes, timingSafeEqual } from 'node:crypto';
import { open as openLmdb } from 'lmdb';
import uWS from 'uWebSockets.js';
import { open, seal } from '../lib/crypto/secret-box.js';
import { sha256Hex } from '../lib/crypto/tokens.js';
import { accessMac } from './floor-token.js';
import { readBody } from './uws-body.js';

/**
 * The vault read's floor (issue #26): the least code that answers RetrieveSecret in this runtime.
 * uWebSockets.js in → the user token and the access token checked (a digest looked up; the access
 * token's HMAC verified once, then remembered, as Pier does) → LMDB get → AES-256-GCM open → the
 * contract's JSON answer. No bus, no actors, no validation library.
 * argv: <data dir> <user token> <access-token MAC key, hex> [cached]; the secret "read-me" holds 1 KiB.
 *
 * `cached`: the two caches Pier's read has and the floor has not, so the like-for-like
 * figure is measured too: the token's digest remembered, and the value opened once while the
 * stored bytes stay the same (Pier's registry cache and actors/vault/ops.ts).
 */
const [dir, userToken, macKeyHex, mode] = process.argv.slice(2) as [string, string, string, string | undefined];
const cached = mode === 'cached';
const digests = new Map<string, string>();
const opened = new Map<string, { sealed: Buffer; value: string }>();
const key = randomBytes(32);
const macKey = Buffer.from(macKeyHex, 'hex');
const users = new Map([[sha256Hex(userToken), 'alice']]);
const signed = (payload: string) => accessMac(macKey, payload);
const checked = new Set<string>();

const db = openLmdb({ path: dir, encoding: 'binary' });
const record = 'alice/chat/read-me';
await db.put(record, seal(key, Buffer.from('v'.repeat(1024)), record));

function accessOk(token: string): boolean {
  if (checked.has(token)) return true;
  const [, p, m] = token.split('.');
  if (p === undefined || m === undefined) return false;
  const want = Buffer.from(signed(p));
  if (m.length !== want.length || !timingSafeEqual(want, Buffer.from(m))) return false;
  checked.add(token);
  return true;
}

uWS
  .App()
  .any('/*', (res, req) => {
    const userToken = req.getHeader('x-authorization');
    let digest = cached ? digests.get(userToken) : undefined;
    if (digest === undefined) {
      digest = sha256Hex(userToken);
      if (cached) digests.set(userToken, digest);
    }
    const user = users.get(digest);
    const access = req.getHeader('x-access-token');
    readBody(res, (body) => {
      res.cork(() => {
        if (!user || !accessOk(access)) return void res.writeStatus('401').end('{"code":401,"message":"unauthorized"}');
        const { name } = JSON.parse(body.toString()) as { name: string };
        const id = `${user}/chat/${name}`;
        const sealed = db.getBinary(id);
        if (!sealed) return void res.writeStatus('404').end('{"code":404,"message":"not found"}');
        const kept = cached ? opened.get(id) : undefined;
        const same = kept?.sealed.equals(sealed) === true;
        const value = same ? kept!.value : open(key, sealed, id).toString();
        if (cached && !same) opened.set(id, { sealed: Buffer.from(sealed), value });
        res.writeHeader('content-type', 'application/json').end(JSON.stringify({ code: 200, message: '', data: { name, value, env: 'prod' } }));
      });
    });
  })
  .listen('127.0.0.1', 0, (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });


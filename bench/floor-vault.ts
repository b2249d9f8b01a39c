import { randomBytes, timingSafeEqual } from 'node:crypto';
import { open as openLmdb } from 'lmdb';
import uWS from 'uWebSockets.js';
import { open, seal } from '../lib/secret-box.js';
import { sha256Hex } from '../lib/tokens.js';
import { accessMac } from './floor-token.js';
import { readBody } from './uws-body.js';

/**
 * The vault read's floor (issue #26): the least code that answers RetrieveSecret in this runtime.
 * uWebSockets.js in → the user token and the access token checked (a digest looked up; the access
 * token's HMAC verified once, then remembered, as Pier does) → LMDB get → AES-256-GCM open → the
 * contract's JSON answer. No bus, no actors, no validation library.
 * argv: <data dir> <user token> <access-token MAC key, hex>; the secret "read-me" holds 1 KiB.
 */
const [dir, userToken, macKeyHex] = process.argv.slice(2) as [string, string, string];
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
    const user = users.get(sha256Hex(req.getHeader('x-authorization')));
    const access = req.getHeader('x-access-token');
    readBody(res, (body) => {
      res.cork(() => {
        if (!user || !accessOk(access)) return void res.writeStatus('401').end('{"code":401,"message":"unauthorized"}');
        const { name } = JSON.parse(body.toString()) as { name: string };
        const id = `${user}/chat/${name}`;
        const sealed = db.getBinary(id);
        if (!sealed) return void res.writeStatus('404').end('{"code":404,"message":"not found"}');
        const value = open(key, sealed, id).toString();
        res.writeHeader('content-type', 'application/json').end(JSON.stringify({ code: 200, message: '', data: { name, value, env: 'prod' } }));
      });
    });
  })
  .listen('127.0.0.1', 0, (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });


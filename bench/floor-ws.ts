import { createCipheriv, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { open } from 'lmdb';
import { Pool } from 'undici';
import uWS from 'uWebSockets.js';
import { readBody } from './uws-body.js';

/**
 * The WebSocket round trip's floor (issue #26): the least code that does what Pier's gateway does
 * for one message, in this runtime. uWS WebSocket in → a signed POST of the event to the same test
 * app (ws-app.js) → the app's send over HTTP (`/runtime/ws/conn/send`, its key and secret checked)
 * → the frame out. No bus, no actors, no ordering or retry, no validation library.
 * A connection's user is its `X-Authorization` header, taken as it is (the floor checks no token).
 * With a folder as its fifth argument, a send to `users` is kept first, as gateway history keeps it
 * (docs/gateway.md "History and recovery"): sealed (AES-256-GCM), one LMDB write transaction that
 * also drops the entry 100 back, the answer once it is on disk; without, nothing is kept.
 * argv: <port to listen on> <app port> <app key> <app secret> [folder to keep sends to users in]
 */
const [port, appPort, appKey, appSecret, keepDir] = process.argv.slice(2) as [string, string, string, string, string | undefined];
const app = new Pool(`http://127.0.0.1:${appPort}`, { connections: 32, pipelining: 1 });
type Conn = uWS.WebSocket<{ id: string; user: string }>;
const conns = new Map<string, Conn>();
const byUser = new Map<string, Set<Conn>>();
let next = 0;
let seq = 0;
const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** The least keeping: per user a counter, each message sealed and written, the one 100 back dropped, on disk before the answer. */
const history = keepDir
  ? (() => {
      const root = open<Buffer, [string, number]>({ path: keepDir, compression: false });
      const key = randomBytes(32);
      const last = new Map<string, number>();
      return {
        async keep(user: string, text: string): Promise<void> {
          const n = (last.get(user) ?? 0) + 1;
          last.set(user, n);
          const iv = randomBytes(12);
          const cipher = createCipheriv('aes-256-gcm', key, iv);
          cipher.setAAD(Buffer.from(`${user}|${n}`));
          const box = Buffer.concat([iv, cipher.update(text, 'utf8'), cipher.final(), cipher.getAuthTag()]);
          await root.transaction(() => {
            root.put([user, n], box);
            if (n > 100) root.remove([user, n - 100]);
          });
          await root.flushed;
        },
      };
    })()
  : null;

uWS
  .App()
  .ws<{ id: string; user: string }>('/ws', {
    upgrade: (res, req, context) => {
      res.upgrade({ id: `floor-${next++}`, user: req.getHeader('x-authorization') }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open: (ws) => {
      const { id, user } = ws.getUserData();
      conns.set(id, ws);
      const set = byUser.get(user) ?? new Set();
      set.add(ws);
      byUser.set(user, set);
    },
    close: (ws) => {
      const { id, user } = ws.getUserData();
      conns.delete(id);
      byUser.get(user)?.delete(ws);
    },
    message: (ws, message) => {
      const { id: connId, user } = ws.getUserData();
      const eventId = `${connId}:${seq++}`;
      const body = JSON.stringify({ action: 'message', user_name: user, conn_id: connId, data: JSON.parse(Buffer.from(message).toString()) });
      const seconds = Math.floor(Date.now() / 1000);
      const signature = `t=${seconds},v1=${createHmac('sha256', appSecret).update(`${seconds}.${eventId}.${body}`).digest('hex')}`;
      void app
        .request({ path: '/cb', method: 'POST', headers: { 'content-type': 'application/json', 'x-pier-event-id': eventId, 'x-pier-signature': signature }, body })
        .then((r) => r.body.dump())
        .catch(() => undefined);
    },
  })
  .post('/runtime/ws/conn/send', (res, req) => {
    const authorised = same(req.getHeader('x-app-key'), appKey) && same(req.getHeader('x-app-secret'), appSecret);
    const aborted = readBody(res, (body) => {
      if (!authorised) return void res.cork(() => res.writeStatus('401').end());
      const { conn_id, users, payload } = JSON.parse(body.toString()) as { conn_id?: string; users?: string[]; payload: unknown };
      const text = JSON.stringify(payload);
      if (conn_id !== undefined) {
        const ws = conns.get(conn_id);
        res.cork(() => {
          if (!ws) return void res.writeStatus('404').end('{"code":404}');
          ws.send(text, false);
          res.writeHeader('content-type', 'application/json').end('{"code":0,"message":"success"}');
        });
        return;
      }
      const deliver = () => {
        if (aborted()) return;
        let delivered = 0;
        for (const user of users ?? []) for (const ws of byUser.get(user) ?? []) ws.cork(() => (ws.send(text, false), delivered++));
        res.cork(() => res.writeHeader('content-type', 'application/json').end(`{"code":0,"message":"success","data":{"delivered":${delivered}}}`));
      };
      if (!history) return deliver();
      void Promise.all((users ?? []).map((user) => history.keep(user, text))).then(deliver, () => {
        if (!aborted()) res.cork(() => res.writeStatus('503').end());
      });
    });
  })
  .listen('127.0.0.1', Number(port), (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });

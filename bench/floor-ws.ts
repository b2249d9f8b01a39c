import { createHmac, timingSafeEqual } from 'node:crypto';
import { Pool } from 'undici';
import uWS from 'uWebSockets.js';
import { readBody } from './uws-body.js';

/**
 * The WebSocket round trip's floor (issue #26): the least code that does what Pier's gateway does
 * for one message, in this runtime. uWS WebSocket in → a signed POST of the event to the same test
 * app (ws-app.js) → the app's send over HTTP (`/runtime/ws/conn/send`, its key and secret checked)
 * → the frame out. No bus, no actors, no ordering or retry, no validation library.
 * argv: <port to listen on> <app port> <app key> <app secret>
 */
const [port, appPort, appKey, appSecret] = process.argv.slice(2) as [string, string, string, string];
const app = new Pool(`http://127.0.0.1:${appPort}`, { connections: 32, pipelining: 1 });
const conns = new Map<string, uWS.WebSocket<{ id: string }>>();
let next = 0;
let seq = 0;
const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

uWS
  .App()
  .ws<{ id: string }>('/ws', {
    upgrade: (res, req, context) => {
      res.upgrade({ id: `floor-${next++}` }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open: (ws) => void conns.set(ws.getUserData().id, ws),
    close: (ws) => void conns.delete(ws.getUserData().id),
    message: (ws, message) => {
      const connId = ws.getUserData().id;
      const eventId = `${connId}:${seq++}`;
      const body = JSON.stringify({ action: 'message', conn_id: connId, data: JSON.parse(Buffer.from(message).toString()) });
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
    readBody(res, (body) => {
      res.cork(() => {
        if (!authorised) return void res.writeStatus('401').end();
        const { conn_id, payload } = JSON.parse(body.toString()) as { conn_id: string; payload: unknown };
        const ws = conns.get(conn_id);
        if (!ws) return void res.writeStatus('404').end('{"code":404}');
        ws.send(JSON.stringify(payload), false);
        res.writeHeader('content-type', 'application/json').end('{"code":0,"message":"success"}');
      });
    });
  })
  .listen('127.0.0.1', Number(port), (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });

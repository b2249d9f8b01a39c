import uWS from 'uWebSockets.js';
import { Pool } from 'undici';
import { readBody } from './uws-body.js';

/**
 * The provider's floor (issue #26): the least code that passes a call through in this runtime.
 * uWebSockets.js in, undici out to the same upstream, the answer streamed back: no auth, no bus,
 * no validation. What Pier spends above this is the cost of its design.
 * argv: <upstream port>
 */
const upstream = new Pool(`http://127.0.0.1:${process.argv[2]}`, { connections: 64, pipelining: 1 });

uWS
  .App()
  .any('/*', (res, req) => {
    const method = req.getMethod().toUpperCase();
    const path = req.getUrl();
    const type = req.getHeader('content-type');
    const aborted = readBody(res, (body) => {
      upstream
        .request({ path, method: method as 'POST', headers: type ? { 'content-type': type } : {}, body })
        .then(async (up) => {
          if (aborted()) return up.body.dump();
          res.cork(() => res.writeStatus(String(up.statusCode)).writeHeader('content-type', String(up.headers['content-type'] ?? 'application/octet-stream')));
          for await (const piece of up.body) if (!aborted()) res.cork(() => res.write(piece as Buffer));
          if (!aborted()) res.cork(() => res.end());
        })
        .catch(() => {
          if (!aborted()) res.cork(() => res.writeStatus('502').end());
        });
    });
  })
  .listen('127.0.0.1', 0, (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });

import uWS from 'uWebSockets.js';

/** The machine's ceiling for the vault bench: a bare uWebSockets.js endpoint answering a constant. */
const answer = JSON.stringify({ code: 200, message: '', data: { name: 'n', value: 'x'.repeat(1024), env: 'prod' } });
uWS
  .App()
  .any('/*', (res) => {
    res.onAborted(() => undefined);
    res.onData((_chunk, last) => {
      if (last) res.cork(() => res.writeHeader('content-type', 'application/json').end(answer));
    });
  })
  .listen('127.0.0.1', 0, (socket) => {
    if (socket) process.stdout.write(`${uWS.us_socket_local_port(socket)}\n`);
  });

import uWS from 'uWebSockets.js';

/** The broadcast ceiling: a bare uWS server; every client subscribes to "all"; "go" from one client publishes `count` frames. */
const app = uWS.App();
app.ws('/ws', {
  maxBackpressure: 64 * 1024 * 1024,
  open: (ws) => void ws.subscribe('all'),
  message: (_ws, msg) => {
    const { count, payload } = JSON.parse(Buffer.from(msg).toString());
    for (let i = 0; i < count; i++) app.publish('all', payload, false);
  },
});
app.listen('127.0.0.1', 0, (s) => {
  if (s) process.stdout.write(`${uWS.us_socket_local_port(s)}\n`);
});

import uWS from 'uWebSockets.js';

/**
 * The broadcast ceiling: a bare uWS server. Clients of /ws subscribe to "all", of /idle to nothing; a message on /go
 * (from a client that does not subscribe) publishes `count` frames to them.
 */
const app = uWS.App();
app.ws('/ws', {
  maxBackpressure: 64 * 1024 * 1024,
  open: (ws) => void ws.subscribe('all'),
});
// Connections that only stay open (the c100k bench's other 99,000): no subscription.
app.ws('/idle', {});
app.ws('/go', {
  message: (_ws, msg) => {
    const { count, payload } = JSON.parse(Buffer.from(msg).toString());
    for (let i = 0; i < count; i++) app.publish('all', payload, false);
  },
});
app.listen('127.0.0.1', 0, (s) => {
  if (s) process.stdout.write(`${uWS.us_socket_local_port(s)}\n`);
});

import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { within } from './wait.js';

/**
 * A TCP forwarder on 127.0.0.1 standing in for the load balancer in front of several edges: each new
 * connection goes to the first of `targets` (ports on 127.0.0.1) that accepts it; with none (or none
 * accepting) it is closed at once, as a balancer without a healthy backend does. A connection already
 * forwarded stays with its edge and ends when either side ends. The test sets `targets` as an
 * operator's balancer would (a draining edge taken out of rotation, a dead one skipped).
 */
export class TcpProxy {
  targets: number[] = [];
  /** The target each forwarded connection went to, in order. */
  readonly forwarded: number[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  static async start(targets: number[]): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server);
    proxy.targets = targets;
    server.on('connection', (client) => proxy.forward(client));
    await within('the proxy to listen', new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve())));
    return proxy;
  }

  private forward(client: Socket): void {
    this.track(client);
    client.on('error', () => client.destroy());
    client.pause();
    const tryTarget = (i: number) => {
      const port = this.targets[i];
      if (port === undefined) return client.destroy();
      const upstream = connect(port, '127.0.0.1');
      const fail = () => {
        upstream.destroy();
        tryTarget(i + 1);
      };
      upstream.once('error', fail);
      upstream.once('connect', () => {
        upstream.off('error', fail);
        if (client.destroyed) return upstream.destroy();
        this.track(upstream);
        this.forwarded.push(port);
        const end = () => {
          client.destroy();
          upstream.destroy();
        };
        for (const s of [client, upstream]) s.on('error', end).on('close', end);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    tryTarget(0);
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.once('close', () => this.sockets.delete(s));
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await within('the proxy to close', new Promise<void>((resolve) => this.server.close(() => resolve())));
  }
}

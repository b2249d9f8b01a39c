import test from 'ava';
import type { Bus } from '../../bus/bus.js';
import { NatsBus } from '../../bus/bus-nats.js';
import { NatsServer } from '../helpers/nats-server.js';
import { busContract } from './bus-suite.js';

let server: NatsServer;
const buses: Bus[] = [];

test.before(async () => {
  server = await NatsServer.start();
});

test.after.always(async () => {
  await Promise.all(buses.map((b) => b.close()));
  await server?.stop();
});

// Two connections, as two processes would have.
busContract(test, 'nats', async () => {
  const a = await NatsBus.connect({ url: server.url, name: 'contract-a', onHandlerError: () => undefined });
  const b = await NatsBus.connect({ url: server.url, name: 'contract-b', onHandlerError: () => undefined });
  buses.push(a, b);
  return [a, b];
});

import test from 'ava';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { GatewayEvent } from '../../../bus/subjects.js';
import { Deliverer, signature } from '../../../actors/callback/delivery.js';
import { AddressPolicy, networksList } from '../../../lib/policy/address-policy.js';
import { within } from '../../helpers/wait.js';

// Callbacks are dialled through the address policy of provider calls (docs/security.md "The bus"):
// a target that leads to a forbidden address is refused at once, and nothing reaches it.
const ev: GatewayEvent = { eventId: 'e00000000001.A:1', connId: 'e00000000001.A', edge: 'e00000000001', user: 'alice', app: 'chat', seq: 1, oldest: 1, action: 'open', data: {}, cookie: null };

/** An HTTP server on every local address (IPv4 and, where there is one, IPv6) recording what reaches it. */
async function listening(): Promise<{ server: Server; port: number; got: Array<{ url: string; headers: IncomingHttpHeaders; body: string }> }> {
  const got: Array<{ url: string; headers: IncomingHttpHeaders; body: string }> = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ url: req.url!, headers: req.headers, body });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, r));
  return { server, port: (server.address() as { port: number }).port, got };
}

function deliverer(own: number[], networks: string[] = []) {
  const counts = { retried: 0 };
  const d = new Deliverer({ timeoutMs: 1_000, retryMs: 2_000, now: () => 1_700_000_000_000 }, { retried: () => counts.retried++ }, new AddressPolicy(() => new Set(own), networksList(networks)));
  return { d, counts };
}

const secret = async () => 'app-secret';

test("a target on one of Pier's own ports on this host is refused at once; nothing reaches it", async (t) => {
  const app = await listening();
  const { d, counts } = deliverer([app.port]);
  try {
    for (const host of ['127.0.0.1', 'localhost']) {
      t.is(await within(`the delivery to ${host} to end`, d.deliver(ev, { host, port: app.port, url: '/cb' }, secret), 1_500), 'refused', host);
    }
    t.is(counts.retried, 0, 'a refusal is not retried');
    t.deepEqual(app.got, []);
  } finally {
    await d.close();
    app.server.close();
  }
});

test('a link-local or cloud-metadata target is refused at once', async (t) => {
  const { d, counts } = deliverer([]);
  try {
    for (const host of ['169.254.169.254', 'fe80::1', '::ffff:169.254.169.254']) {
      t.is(await within(`the delivery to ${host} to end`, d.deliver(ev, { host, port: 80, url: '/latest/meta-data/' }, secret), 1_500), 'refused', host);
    }
    t.is(counts.retried, 0);
  } finally {
    await d.close();
  }
});

test('outside PIER_PROVIDER_NETWORKS, when set, is refused', async (t) => {
  const app = await listening();
  const { d } = deliverer([], ['10.0.0.0/8']);
  try {
    t.is(await within('the delivery to end', d.deliver(ev, { host: '127.0.0.1', port: app.port, url: '/cb' }, secret), 1_500), 'refused');
    t.deepEqual(app.got, []);
  } finally {
    await d.close();
    app.server.close();
  }
});

test('an allowed target is dialled at its resolved address with its own Host header, path and signature', async (t) => {
  const app = await listening();
  const { d } = deliverer([40090]);
  try {
    t.is(await within('the delivery to end', d.deliver(ev, { host: 'localhost', port: app.port, url: '/ws/message' }, secret)), 'delivered');
    t.is(app.got.length, 1);
    const [got] = app.got;
    t.is(got.url, '/ws/message');
    t.is(got.headers.host, `localhost:${app.port}`, 'the Host header names the app, not the address dialled');
    t.is(got.headers['x-pier-signature'], signature(1_700_000_000, ev.eventId, got.body, 'app-secret'));
  } finally {
    await d.close();
    app.server.close();
  }
});

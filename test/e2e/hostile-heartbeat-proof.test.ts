import test from 'ava';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { hostname } from 'node:os';
import { decode, encode } from '../../bus/codec.js';
import { KeyPair } from '../../bus/seal.js';
import type { Heartbeat } from '../../bus/subjects.js';
import { SHARED, trustCluster, type TrustCluster } from '../helpers/trust-cluster.js';
import { until } from '../helpers/wait.js';
import { connect as wsConnect } from '../helpers/ws-client.js';

// Issue #52, finding F5 (docs/security.md "Presence, authenticated by role"), on the production
// shape (`pier bus init` identities, anchors, edges without the master key): a thief holding only
// `vault.nats.env` announces a vault of wire format 1, with the anchored key (and role signature)
// copied from a real vault's heartbeat. Before heartbeats proved their role, every operator
// operation on versions answered 503 while it ran, and no process said goodbye: a stopped edge
// counted as alive until the death bound. The bound here is 60 s; the test waits 20 s at most.
const DEAD_MS = 60_000;
let c: TrustCluster;

test.before(async () => {
  c = await trustCluster({ env: { PIER_PEER_DEAD_MS: String(DEAD_MS) } });
});

test.after.always(async () => {
  await c?.stop();
});

const admin = (path: string, init: RequestInit = {}) =>
  fetch(`${c.actors.adminUrl}${path}`, { ...init, headers: { authorization: `Bearer ${SHARED.PIER_ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers } });

test.serial('F5: a thief holding only vault.nats.env announces a wire-1 vault: the operator\'s versions still answers, and a stopped edge\'s goodbye is acted on at once', async (t) => {
  for (const value of ['first', 'second']) t.is((await admin('/admin/v1/vault/secret?user=alice&workspace=chat&name=f5', { method: 'PUT', body: JSON.stringify({ value }) })).status, 200);

  // What the thief hears: a real vault heartbeat, with the anchored key and the role's signature.
  const nc = await c.client('vault');
  const real = await new Promise<Heartbeat>((resolve) => {
    const sub = nc.subscribe('pier.process.heartbeat.vault', {
      callback: (_err, m) => {
        sub.unsubscribe();
        resolve(decode<Heartbeat>(m.data));
      },
    });
  });

  // The thief's own process, signed with a key it made, as 0.2.0 announced itself (the fields its
  // signature covers, laid out as 0.2.0 lays them out), every 250 ms.
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const info = { id: 'vault-thief', busId: randomBytes(6).toString('hex'), roles: ['vault'], pid: 4242, host: hostname(), startedAt: new Date().toISOString(), version: '0.2.0', wire: { speaks: 1, oldest: 1 } };
  const self = { ...info, key: KeyPair.generate().publicKey, roleKeys: real.roleKeys, signKey: publicKey.export({ format: 'jwk' }).x! };
  let seq = 0;
  const announce = () => {
    const body = { ...self, seq: ++seq };
    nc.publish('pier.process.heartbeat.vault', encode({ ...body, sig: sign(null, Buffer.from(JSON.stringify(['vault', body.id, body.busId, body.key, body.roleKeys, body.seq, body.signKey, body.wire.speaks, body.wire.oldest])), privateKey).toString('base64url'), roleSig: real.roleSig }));
  };
  announce();
  const timer = setInterval(announce, 250);
  t.teardown(() => clearInterval(timer));
  // It answers `pier status` too, signed with its key: listed, it is believed alive by the admin.
  nc.subscribe('pier.process.describe', {
    callback: (_err, m) => {
      const report = { info, counters: {}, metrics: [] };
      const sig = sign(null, Buffer.from(JSON.stringify([report.info, report.counters, report.metrics])), privateKey).toString('base64url');
      m.respond(encode({ ok: true, data: { ...report, sig } }));
    },
  });
  await nc.flush();
  await until('the admin to believe the thief\'s vault alive (pier status lists it)', async () => {
    const status = (await (await admin('/admin/v1/status')).json()) as { data: { replicas: Array<{ id: string }> } };
    return status.data.replicas.some((r) => r.id === 'vault-thief');
  });

  const versions = await admin('/admin/v1/vault/versions?user=alice&workspace=chat&name=f5');
  const body = await versions.text();
  t.is(versions.status, 200, body);
  t.deepEqual((JSON.parse(body) as { data: { versions: Array<{ version: number }> } }).data.versions?.map((v) => v.version), [2, 1]);

  // A third edge, with a connection on it the admin maps to it (so the admin counts it alive).
  const edge3 = await c.startEdge('edge3');
  const ws = await wsConnect(edge3.ports!.public, 'chat.alice.localhost', { 'x-authorization': c.token, 'user-agent': 'f5' });
  t.teardown(() => ws.ws.terminate());
  type Listing = { partial?: boolean; data: Array<{ conns: Array<{ process: string | null }> }> };
  const listing = async () => (await (await admin('/admin/v1/connections?user=alice&app=chat')).json()) as Listing;
  await until('the admin to count edge3 alive (a connection on it named by its process)', async () => {
    const l = await listing();
    return l.partial !== true && l.data.some((a) => a.conns.some((conn) => conn.process === edge3.instance));
  });
  await edge3.stop();
  await until(`the admin to see edge3 leave by its goodbye, not by the death bound (${DEAD_MS} ms)`, async () => (await listing()).partial !== true, 20_000).catch((err: Error) => {
    t.fail(`${err.message}\n${edge3.report()}`);
  });
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cli, pierEnv, ROOT, tempDir, cleanup } from '../helpers/pier.js';
import { UploadClient } from '../helpers/upload-client.js';
import { WsApp } from '../helpers/ws-app.js';
import { connectSecure } from '../helpers/ws-client.js';
import { LocalTopology, prepareOperatorFiles, readCompose } from '../helpers/topology.js';
import { until as waitUntil } from '../helpers/wait.js';
import { connect as connectNats } from 'nats';
import { KEYRING_ROLES, type Role } from '../../lib/config/config.js';

const secrets = { PIER_ADMIN_TOKEN: randomBytes(24).toString('hex'), PIER_MASTER_KEY: randomBytes(32).toString('hex') };
let topo: LocalTopology;
const scratch = tempDir();

test.before(async () => {
  // The operator's files, made as the README says; then the topology, authenticated and on TLS.
  topo = await LocalTopology.start(secrets, prepareOperatorFiles(join(scratch, 'operator'), secrets.PIER_MASTER_KEY));
});

test.after.always(async () => {
  await topo?.stop();
  cleanup(scratch);
});

/** The CLI as `docker compose exec admin pier ...` runs it. */
/** carol's token and app, from the feature test, for the failure tests after it. */
let carol: { user: string; app: AppEnv } | undefined;
const adminCli = () => ({ ...pierEnv(scratch, secrets), PIER_ADMIN_URL: topo.pier.get('admin')!.adminUrl });
/** The test CA (the NATS nodes' and the browsers' certificates). */
const ca = () => readFileSync(join(scratch, 'operator', 'deploy', 'nats', 'tls', 'ca.pem'));
/** An edge's readiness, on its system listener (plain: apps reach it inside the cluster). */
const ready = async (name: string) => (await fetch(`http://127.0.0.1:${topo.pier.get(name)!.ports!.system}/readyz`).catch(() => null))?.status === 200;

test.serial('the compose file describes a 3-node NATS cluster, every role, two edges, and least privilege per service', (t) => {
  const services = readCompose();
  const roles = (name: string) => services[name].command?.[services[name].command!.indexOf('--roles') + 1];
  t.is(Object.values(services).filter((s) => s.image?.startsWith('nats')).length, 3);
  t.true(Object.keys(services).filter((n) => roles(n) === 'edge').length >= 2);
  for (const role of ['registry', 'token', 'provider', 'vault', 'callback', 'upload', 'admin']) t.true(Object.keys(services).some((n) => roles(n)?.split(',').includes(role)), role);
  for (const [name, svc] of Object.entries(services)) {
    if (svc.build === undefined) continue;
    const role = roles(name)!;
    // Each service mounts its own role's credentials, and no other's; without the master key, the
    // bus anchors (public) and, for the callback role only, its role key.
    const keyring = KEYRING_ROLES.includes(role as Role);
    t.deepEqual(
      svc.volumes?.filter((v) => v.includes('/bus/')),
      [
        `./deploy/nats/bus/${role}.nats.env:/run/pier/nats.env:ro`,
        ...(keyring ? [] : ['./deploy/nats/bus/anchors:/run/pier/anchors:ro']),
        ...(role === 'callback' ? ['./deploy/nats/bus/callback.key:/run/pier/callback.key:ro'] : []),
        ...(role === 'admin' ? ['./deploy/nats/bus/admin.key:/run/pier/admin.key:ro'] : []),
        ...(role === 'edge' ? ['./deploy/nats/bus/history.key:/run/pier/history.key:ro'] : []),
      ],
      name,
    );
    t.is('PIER_MASTER_KEY' in (svc.environment ?? {}), keyring, `${name}: the master key only where it is used`);
    t.is(svc.environment?.PIER_BUS_ANCHORS, keyring ? undefined : '/run/pier/anchors', `${name}: the bus anchors where the master key is not`);
    t.is(svc.environment?.PIER_CALLBACK_KEY, role === 'callback' ? '/run/pier/callback.key' : undefined, `${name}: the callback key only for the callback role`);
    t.is(svc.environment?.PIER_ADMIN_KEY, role === 'admin' ? '/run/pier/admin.key' : undefined, `${name}: the admin key only for the admin process`);
    t.is(svc.environment?.PIER_HISTORY_KEY, role === 'edge' ? '/run/pier/history.key' : undefined, `${name}: the history key only for edges`);
    t.is('PIER_ADMIN_TOKEN' in (svc.environment ?? {}), role === 'admin', `${name}: the admin token only for the admin process`);
    // The vault keeps its state in JetStream: no volume of its own, any number of replicas.
    if (role === 'vault' || role === 'registry' || role === 'edge') {
      t.is(svc.environment?.PIER_STATE, 'jetstream', name);
      t.false((svc.volumes ?? []).some((v) => v.endsWith(':/data')), `${name}: no shared volume`);
    }
    // Browsers reach the edges over TLS, terminated by the edges themselves.
    if (role === 'edge') t.truthy(svc.environment?.PIER_TLS_CERT && svc.environment?.PIER_TLS_KEY, `${name}: TLS for browsers`);
  }
  t.is(topo.nats.size, 3);
  t.true(topo.pier.size >= 3);
});

test.serial("the cluster's NATS refuses anonymous clients", async (t) => {
  for (const [name, node] of topo.nats) {
    const verdict = await connectNats({ servers: node.url, tls: { caFile: join(scratch, 'operator', 'deploy', 'nats', 'tls', 'ca.pem') }, reconnect: false }).then(
      async (nc) => {
        await nc.close();
        return 'connected';
      },
      (err: { code: string }) => err.code,
    );
    t.is(verdict, 'AUTHORIZATION_VIOLATION', name);
  }
});

test.serial('an install by the admin process is known across the NATS cluster', async (t) => {
  const add = await cli(['user', 'add', 'alice', '--json'], adminCli());
  t.is(add.code, 0, add.stderr);
  const app = await cli(['app', 'install', '--user', 'alice', '--manifest', join(ROOT, 'examples', 'PlatformManifest.yaml'), '--json'], adminCli());
  t.is(app.code, 0, app.stderr);
  const list = await cli(['app', 'list', '--json'], adminCli());
  t.deepEqual(list.json.map((a: { app: string }) => a.app), ['chat']);
  const status = await cli(['status', '--json'], adminCli());
  t.is(status.json.replicas.length, topo.pier.size);
});

test.serial('every feature through the topology: vault, WebSocket callbacks and upload, across both edges', async (t) => {
  const callbacks = await WsApp.start();
  t.teardown(() => callbacks.stop());
  const manifest = join(scratch, 'all.yaml');
  writeFileSync(
    manifest,
    `metadata: { name: everything }
permission:
  sysData:
    - { dataType: secret, group: secret.vault, version: v1, ops: [CreateSecret?workspace=w, RetrieveSecret?workspace=w] }
options:
  websocket: { url: /cb, port: ${callbacks.port} }
upload: { fileType: ["*"], dest: /data/files }
`,
  );
  const user = (await cli(['user', 'add', 'carol', '--json'], adminCli())).json.token;
  const installed = (await cli(['app', 'install', '--user', 'carol', '--manifest', manifest, '--json'], adminCli())).json;
  const app: AppEnv = installed.env;
  carol = { user, app };
  // The upload role's root is the compose file's PIER_UPLOAD_ROOT (its bind mount, here a scratch folder).
  t.is(installed.uploadDir, join(topo.binds.get('/srv/apps')!, 'carol', 'data', 'files'));
  const edge1 = topo.pier.get('edge-1')!;
  const edge2 = topo.pier.get('edge-2')!;
  t.is(app.OS_SYSTEM_SERVER, `127.0.0.1:${edge1.ports!.system}`, "the balancer's system port (here: the first edge's)");

  // Vault: a token from the system listener the app was given, used on edge-2's.
  const access = await waitUntil('an access token, once the token replicas know the app', () => accessToken(app, vaultPerm('w', ['CreateSecret', 'RetrieveSecret'])));
  const sys2 = `127.0.0.1:${edge2.ports!.system}`;
  const created = await waitUntil('the secret to be created through edge-2', async () => {
    const r = await vaultCall(sys2, 'CreateSecret', 'w', { user, access }, { name: 'k', value: 'through-compose' });
    return r.status === 200 ? r : undefined;
  });
  t.is(created.status, 200);
  t.is((await vaultCall(sys2, 'RetrieveSecret', 'w', { user, access }, { name: 'k' })).json.data.data.value, 'through-compose');

  // wss:// on edge-1 (the edges terminate TLS): the callback actor delivers; the app answers
  // through edge-2's local API.
  const c = await connectSecure(edge1.ports!.public!, 'everything.carol.localhost', ca(), { 'x-authorization': user });
  c.ws.send(JSON.stringify({ event: 'hello', data: {} }));
  await callbacks.until(() => callbacks.accepted.some((k) => k.body.action === 'message'));
  const connId = callbacks.accepted[0].body.conn_id;
  const sent = await fetch(`http://127.0.0.1:${edge2.ports!.local}/runtime/ws/conn/send`, {
    method: 'POST',
    headers: { 'x-app-key': app.OS_APP_KEY, 'x-app-secret': app.OS_APP_SECRET },
    body: JSON.stringify({ conn_id: connId, payload: 'hi from the app' }),
  });
  t.like((await sent.json()).data, { delivered: 1 });
  await waitUntil('the app\'s message at the browser', () => c.received.includes('"hi from the app"'));
  c.ws.close();

  // Upload over https through edge-2 to the upload actor.
  const up = new UploadClient(edge2.ports!.upload!, 'everything.carol.localhost', user, ca());
  const rec = await up.create({ storage_path: '/data/files', file_relative_path: 'a/b.txt', file_type: 'txt', file_size: 5 });
  t.is(rec.status, 200, JSON.stringify(rec.json));
  t.is((await up.patch(rec.json.data.id, 0, Buffer.from('hello'))).json.message, 'File uploaded successfully');
  t.is(readFileSync(join(installed.uploadDir, 'a', 'b.txt'), 'utf8'), 'hello');
});

test.serial('one NATS node dies: the processes fail over to the others', async (t) => {
  await topo.nats.get('nats-1')!.kill();
  for (const edge of ['edge-1', 'edge-2']) await waitUntil(`${edge} to be ready again`, () => ready(edge), 20_000);
  await waitUntil('the admin process to reach the registry again', async () => (await cli(['user', 'list', '--json'], adminCli())).code === 0, 20_000);
  // Writes come back within seconds (a stream may be electing a new leader): an attempt that timed
  // out may still have been applied, so "already exists" counts as done.
  await waitUntil('a registry write to succeed again', async () => {
    const add = await cli(['user', 'add', 'bob', '--json'], adminCli());
    return add.code === 0 || add.stderr.includes('already exists');
  }, 20_000, 500);
  // Any registry replica may answer; one whose view is re-attaching after the node loss may be a
  // moment behind (docs/operations.md): it catches up.
  const users = await waitUntil('every registry replica to list bob', async () => {
    const list = await cli(['user', 'list', '--json'], adminCli());
    return list.code === 0 && list.json.some((u: { name: string }) => u.name === 'bob') ? list : undefined;
  }, 20_000, 250);
  t.deepEqual(users.json.map((u: { name: string }) => u.name), ['alice', 'bob', 'carol']);
});

test.serial('a registry replica, a vault replica and a NATS node gone: the secret written before is still served', async (t) => {
  t.truthy(carol, 'the feature test ran first');
  // nats-1 is already down (previous test); now a vault replica and a registry replica go too.
  await topo.pier.get('vault-1')!.stop('SIGKILL');
  await topo.pier.get('registry-1')!.stop('SIGKILL');
  const { user, app } = carol!;
  const sys = `127.0.0.1:${topo.pier.get('edge-2')!.ports!.system}`;
  const access = await waitUntil('an access token through the surviving processes', () => accessToken(app, vaultPerm('w', ['RetrieveSecret'])), 20_000);
  const read = await waitUntil('the surviving vault replicas to serve the secret', async () => {
    const r = await vaultCall(sys, 'RetrieveSecret', 'w', { user, access }, { name: 'k' });
    return r.status === 200 ? r : undefined;
  }, 20_000);
  t.is(read.json.data.data.value, 'through-compose');
});

import test from 'ava';
import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, ErrorCode, type NatsConnection } from 'nats';
import { encode } from '../../bus/codec.js';
import { readCredsFile } from '../../lib/config/nats-auth.js';
import { cleanup, failedStart, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { within } from '../helpers/wait.js';

// docs/security.md "The bus" against a real nats-server: the server, not Pier's goodwill, refuses what
// an identity may not do. The review's two attacks (an app secret in clear, a minted user token)
// are replayed with a bare client.
let dir: string;
let bus: SecureBus;
let registry: PierProcess;
const masterKey = randomBytes(32).toString('hex');

test.before(async () => {
  dir = tempDir();
  bus = await SecureBus.start(dir);
  registry = await PierProcess.start(pierEnv(join(dir, 'registry'), { ...bus.envFor('registry'), PIER_MASTER_KEY: masterKey }), ['--roles', 'registry']);
});

test.after.always(async () => {
  await registry?.stop();
  await bus?.stop();
  cleanup(dir);
});

/** A bare NATS client with identity `name` (none: anonymous). */
function client(name: string | null): Promise<NatsConnection> {
  const tls = { caFile: bus.ca.cert };
  if (name === null) return connect({ servers: bus.url, tls, reconnect: false });
  const { user, password } = readCredsFile(join(bus.dir, `${name}.nats.env`));
  return connect({ servers: bus.url, tls, user, pass: password, inboxPrefix: `_INBOX.${user}`, reconnect: false });
}

/** The server's verdict on a request: its error code, or 'answered'. */
async function verdict(nc: NatsConnection, subject: string, body: unknown): Promise<string> {
  try {
    await nc.request(subject, encode(body), { timeout: 2_000 });
    return 'answered';
  } catch (err) {
    return (err as { code: string }).code;
  }
}

/** The server's verdict on a subscription: the error its callback gets, or 'allowed' after a round trip. */
async function subscribeVerdict(nc: NatsConnection, subject: string): Promise<string> {
  const refused = new Promise<string>((resolve) => nc.subscribe(subject, { callback: (err) => err && resolve((err as { code: string }).code) }));
  await nc.flush();
  return within(`the server's answer to a subscription to ${subject}`, Promise.race([refused, new Promise<string>((r) => setTimeout(() => r('allowed'), 500))]));
}

test('an anonymous client, a wrong password and a client without the CA are all refused', async (t) => {
  const anonymous = await client(null).then(() => 'connected', (err: { code: string }) => err.code);
  t.is(anonymous, ErrorCode.AuthorizationViolation);
  const { user } = readCredsFile(join(bus.dir, 'edge.nats.env'));
  const wrong = await connect({ servers: bus.url, tls: { caFile: bus.ca.cert }, user, pass: 'not-the-password', reconnect: false }).then(() => 'connected', (err: { code: string }) => err.code);
  t.is(wrong, ErrorCode.AuthorizationViolation);
  const untrusted = await connect({ servers: bus.url, user, pass: 'x', reconnect: false }).then(() => 'connected', (err: Error) => err.message);
  t.regex(untrusted, /certificate|self.signed|TLS/i, 'the server certificate is not trusted without the CA');
});

test("with the edge's identity: app secrets, user tokens, registry and vault writes, and listening in are refused by the server", async (t) => {
  const edge = await client('edge');
  try {
    t.is(await verdict(edge, 'pier.registry.app.credentials', { appKey: 'ak_x' }), ErrorCode.PermissionsViolation, 'app secret');
    t.is(await verdict(edge, 'pier.registry.user.token', { name: 'alice' }), ErrorCode.PermissionsViolation, 'mint a user token');
    t.is(await verdict(edge, 'pier.registry.user.add', { name: 'mallory' }), ErrorCode.PermissionsViolation, 'add a user');
    t.is(await verdict(edge, 'pier.registry.app.install', {}), ErrorCode.PermissionsViolation, 'write the registry');
    t.is(await verdict(edge, 'pier.vault.rotate', {}), ErrorCode.PermissionsViolation, 'rewrap the vault');
    t.is(await verdict(edge, 'pier.vault.audit', { limit: 10 }), ErrorCode.PermissionsViolation, 'read the audit');
    for (const s of ['>', 'pier.>', 'pier.vault.op', 'pier.registry.app.credentials', 'pier.cb.deliver.x', '_INBOX.>', '_INBOX.pier-token.>']) {
      t.is(await subscribeVerdict(edge, s), ErrorCode.PermissionsViolation, `subscribe ${s}`);
    }
    // What the edge does need still works: the registry answers its snapshot request.
    t.is(await verdict(edge, 'pier.registry.snapshot', {}), 'answered');
  } finally {
    await edge.close();
  }
});

test('the roles that need an app secret can ask for it; user tokens come only from the admin identity', async (t) => {
  const token = await client('token');
  const admin = await client('admin');
  try {
    t.is(await verdict(token, 'pier.registry.app.credentials', { appKey: 'ak_unknown' }), 'answered', 'the token role is answered (404 for an unknown key)');
    t.is(await verdict(token, 'pier.registry.user.token', { name: 'alice' }), ErrorCode.PermissionsViolation);
    t.is(await verdict(admin, 'pier.registry.user.add', { name: 'alice' }), 'answered');
    t.is(await verdict(admin, 'pier.registry.app.credentials', { appKey: 'ak_unknown' }), ErrorCode.PermissionsViolation, 'not even the admin reads app secrets');
  } finally {
    await token.close();
    await admin.close();
  }
});


test('a process whose credentials are refused, or readable by others, stops at start with one line', async (t) => {
  const wrong = join(dir, 'wrong.nats.env');
  writeFileSync(wrong, readFileSync(join(bus.dir, 'edge.nats.env'), 'utf8').replace(/NATS_PASSWORD=.*/, 'NATS_PASSWORD=wrong'), { mode: 0o600 });
  const refused = await failedStart(pierEnv(join(dir, 'e1'), { ...bus.envFor('edge'), ...bus.anchorEnv(masterKey), NATS_CREDS: wrong }), ['--roles', 'edge']);
  t.is(refused.code, 1);
  t.regex(refused.stderr, /^pier: NATS at nats:\/\/127\.0\.0\.1:\d+ refused the credentials of "pier-edge"\n$/);
  chmodSync(wrong, 0o644);
  const open = await failedStart(pierEnv(join(dir, 'e2'), { ...bus.envFor('edge'), ...bus.anchorEnv(masterKey), NATS_CREDS: wrong }), ['--roles', 'edge']);
  t.is(open.code, 1);
  t.regex(open.stderr, /^pier: NATS_CREDS: .*wrong\.nats.env is readable by others \(mode 644\): chmod 600 it\n$/);
});

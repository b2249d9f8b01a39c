import test from 'ava';
import { createHmac, randomBytes } from 'node:crypto';
import type { NatsConnection } from 'nats';
import { decode, encode } from '../../bus/codec.js';
import { KeyPair, Sealer } from '../../bus/seal.js';
import { anchorsFromMasterKeys } from '../../lib/crypto/bus-anchors.js';
import { parseMasterKey } from '../../lib/config/config-secrets.js';
import { SHARED, trustCluster, type TrustCluster } from '../helpers/trust-cluster.js';
import { sleep, until } from '../helpers/wait.js';
import { sha256Hex } from '../../lib/crypto/tokens.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { cli } from '../helpers/pier.js';
import { verifySignature, type Callback } from '../helpers/ws-app.js';
import { connect as wsConnect } from '../helpers/ws-client.js';

// Finding S-2 (docs/security.md, "Keys with an anchor"), replayed on the production shape (3-node
// authenticated JetStream cluster, `pier bus init` identities, edges without the master key): a
// thief holding one role's whole `.nats.env` file, and nothing else, asks the registry for an app's
// secret the way a process of that role would, in every wire format a Pier process has spoken.
// Before anchors, the registry sealed the secret to whatever key the asker sent, and the thief
// bought an access token with it; now the answer is sealed only to the token role's anchored key.
let c: TrustCluster;

test.before(async () => {
  c = await trustCluster();
});

test.after.always(async () => {
  await c?.stop();
});

interface Attempt {
  /** The secret, when the thief could open an answer. */
  opened?: string;
  /** What the cluster said instead. */
  said: string[];
}

/**
 * Asks `subject` for what belongs to `appKey` as a Pier process would, with the thief's own key
 * (the request layout before anchors: key; and after: key and nonce), and with the role's anchored
 * public key (public, so a thief has it too): whatever it can open comes back.
 */
async function steal(nc: NatsConnection, subject: string, appKey: string, anchoredKey: string): Promise<Attempt> {
  const thief = new Sealer(KeyPair.generate());
  const said: string[] = [];
  const layouts: Array<{ key: Buffer; nonce: Buffer | null }> = [
    { key: thief.self.raw, nonce: null },
    { key: thief.self.raw, nonce: randomBytes(16) },
    { key: Buffer.from(anchoredKey, 'base64url'), nonce: randomBytes(16) },
  ];
  for (const { key, nonce } of layouts) {
    let data: Uint8Array;
    try {
      data = (await nc.request(subject, Buffer.concat([key, ...(nonce ? [nonce] : []), encode({ appKey })]), { timeout: 3_000 })).data;
    } catch (err) {
      said.push(`no answer: ${(err as { code?: string }).code ?? (err as Error).message}`);
      continue;
    }
    if (data[0] === 1) {
      try {
        const plain = thief.open(data, nonce ? Buffer.concat([Buffer.from(`${subject}|reply|`), nonce]) : `${subject}|reply`).plain;
        const answer = decode<{ ok: boolean; data?: { appSecret?: string; callbackKey?: string } }>(plain);
        const opened = answer.data?.appSecret ?? answer.data?.callbackKey;
        if (opened) return { opened, said };
      } catch {
        said.push('a sealed answer the thief cannot open');
      }
      continue;
    }
    said.push(String(decode<{ error?: { message?: string } }>(data).error?.message));
  }
  return { said };
}

const anchors = () => anchorsFromMasterKeys([parseMasterKey(SHARED.PIER_MASTER_KEY, 'PIER_MASTER_KEY')]);

test.serial('S-2: a thief holding only token.nats.env gets no app secret from the registry', async (t) => {
  const nc = await c.client('token');
  const attempt = await steal(nc, 'pier.registry.app.credentials', c.chat.OS_APP_KEY, anchors().token![0].seal);
  if (attempt.opened) {
    // What the secret buys: the app's own local API (and an access token, and the user's vault).
    const r = await fetch(`http://127.0.0.1:${c.edges[0].ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': c.chat.OS_APP_KEY, 'x-app-secret': attempt.opened } });
    t.fail(`the thief opened chat's app secret (the local API answers it ${r.status})`);
    return;
  }
  t.true(attempt.said.some((s) => /sealed only to an anchored token key/.test(s)), attempt.said.join('; '));
  t.true(attempt.said.includes('a sealed answer the thief cannot open'), attempt.said.join('; '));
  // The real token role still gets it: an access token is bought with the app's proof.
  t.is((await fetch(`http://127.0.0.1:${c.edges[0].ports!.local}/runtime/ws/conn/list`, { headers: { 'x-app-key': c.chat.OS_APP_KEY, 'x-app-secret': c.chat.OS_APP_SECRET } })).status, 200);
});

test.serial('S-2: a thief holding only callback.nats.env may not ask for app secrets at all, and gets no callback key', async (t) => {
  const nc = await c.client('callback');
  const secrets = await steal(nc, 'pier.registry.app.credentials', c.chat.OS_APP_KEY, anchors().token![0].seal);
  t.is(secrets.opened, undefined, 'the thief opened chat\'s app secret');
  t.true(secrets.said.every((s) => /PERMISSIONS_VIOLATION|no answer/.test(s)), secrets.said.join('; '));
  const keys = await steal(nc, 'pier.registry.app.callbackkey', c.chat.OS_APP_KEY, anchors().callback![0].seal);
  t.is(keys.opened, undefined, 'the thief opened chat\'s callback key');
  t.true(keys.said.some((s) => /sealed only to an anchored callback key/.test(s)), keys.said.join('; '));
  // The real callback role signs with the callback key: alice's app verifies the open by deriving it from its secret.
  const before = c.app.accepted.length;
  const ws = await wsConnect(c.edges[0].ports!.public, 'chat.alice.localhost', { 'x-authorization': c.token, 'user-agent': 'stolen-role' });
  const open = await until('the open of the new connection at the app', () => c.app.accepted.slice(before).find((k) => k.body.action === 'open'));
  t.true(verifySignature(open, c.chat.OS_APP_SECRET), 'the open verifies with the callback key derived from the app secret');
  t.false(verifyWithSecretItself(open, c.chat.OS_APP_SECRET), 'and not with the app secret itself: the callback role never held it');
  ws.ws.close();
});

function verifyWithSecretItself(cb: Callback, secret: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(cb.headers['x-pier-signature'] ?? ''));
  return m !== null && createHmac('sha256', secret).update(`${m[1]}.${cb.headers['x-pier-event-id']}.${cb.raw}`).digest('hex') === m[2];
}

/**
 * A request sealed to `role`'s key as a Pier process makes it, in both layouts a Pier process has
 * spoken (the answer's key first; and key and nonce), from the thief's own key. What the thief can
 * open of the answer comes back, or what the cluster said.
 */
async function askSealed(nc: NatsConnection, subject: string, roleKey: string, body: unknown): Promise<Attempt & { answer?: unknown }> {
  const thief = new Sealer(KeyPair.generate());
  const said: string[] = [];
  for (const nonce of [null, randomBytes(16)]) {
    const prefix = Buffer.concat([thief.self.raw, ...(nonce ? [nonce] : [])]);
    const box = thief.seal(encode(body), roleKey, nonce ? Buffer.concat([Buffer.from(`${subject}|request|`), prefix]) : `${subject}|request|${thief.self.publicKey}`);
    let data: Uint8Array;
    try {
      data = (await nc.request(subject, Buffer.concat([prefix, box]), { timeout: 3_000 })).data;
    } catch (err) {
      said.push(`no answer: ${(err as { code?: string }).code ?? (err as Error).message}`);
      continue;
    }
    if (data[0] === 1) {
      try {
        const answer = decode<{ ok: boolean; data?: unknown; error?: { message?: string } }>(thief.open(data, nonce ? Buffer.concat([Buffer.from(`${subject}|reply|`), nonce]) : `${subject}|reply`).plain);
        if (answer.ok) return { said, answer: answer.data };
        said.push(String(answer.error?.message));
      } catch {
        said.push('a sealed answer the thief cannot open');
      }
      continue;
    }
    said.push(String(decode<{ error?: { message?: string } }>(data).error?.message));
  }
  return { said };
}

test.serial('a thief holding only admin.nats.env reads no secret and mints no user token: what only the operator may do needs the admin key', async (t) => {
  // A secret for the thief to want, set by the operator through the admin API (with the admin token).
  const set = await fetch(`${c.actors.adminUrl}/admin/v1/vault/secret?user=alice&workspace=chat&name=db-password`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${SHARED.PIER_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ value: 'hunter2-the-db-password' }),
  });
  t.is(set.status, 200, await set.text());
  const nc = await c.client('admin');
  const read = await askSealed(nc, 'pier.vault.operator', anchors().vault![0].seal, { op: 'get', user: 'alice', workspace: 'chat', name: 'db-password' });
  t.is(read.answer, undefined, `the thief read the secret: ${JSON.stringify(read.answer)}`);
  t.true(read.said.some((s) => /takes requests only made with an anchored admin key/.test(s)), read.said.join('; '));
  const minted = await askSealed(nc, 'pier.registry.user.token', anchors().registry![0].seal, { name: 'alice' });
  t.is(minted.answer, undefined, `the thief minted a user token: ${JSON.stringify(minted.answer)}`);
  t.true(minted.said.some((s) => /takes requests only made with an anchored admin key/.test(s)), minted.said.join('; '));
  // The operator, through the admin process (which holds the admin key), still can.
  const got = await fetch(`${c.actors.adminUrl}/admin/v1/vault/secret?user=alice&workspace=chat&name=db-password`, { headers: { authorization: `Bearer ${SHARED.PIER_ADMIN_TOKEN}` } });
  t.is(got.status, 200);
});

test.serial('a thief holding only vault.nats.env joins the vault\'s queue group and answers reads with a value of its own: the edge never hands it to an app', async (t) => {
  const dir = c.dir;
  writeFileSync(join(dir, 'keeper.yaml'), 'metadata: { name: keeper }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=keeper, CreateSecret?workspace=keeper] }\n');
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'keeper.yaml'), '--json'], c.cliEnv);
  t.is(installed.code, 0, installed.stderr);
  const system = `127.0.0.1:${c.edges[0].ports!.system}`;
  const app = { ...(installed.json.env as AppEnv), OS_SYSTEM_SERVER: system };
  const access = await accessToken(app, vaultPerm('keeper', ['RetrieveSecret', 'CreateSecret']));
  const auth = { user: c.token, access };
  t.is((await vaultCall(system, 'CreateSecret', 'keeper', auth, { name: 'motto', value: 'the-real-value' })).status, 200);

  // The thief answers what the queue group hands it: in clear, and sealed to the asker from a key of its own.
  const nc = await c.client('vault');
  const forger = new Sealer(KeyPair.generate());
  let answered = 0;
  const forged = { ok: true, data: { code: 200, message: 'success', data: { name: 'motto', value: 'the-thiefs-value' } } };
  nc.subscribe('pier.vault.op', {
    queue: 'vault',
    callback: (_err, m) => {
      if (!m.reply) return;
      answered++;
      const key = Buffer.from(m.data.subarray(0, 32)).toString('base64url');
      const nonce = Buffer.from(m.data.subarray(32, 48));
      // In clear; sealed to the asker as the layout with a nonce wants; and as the layout before it.
      const variants = [() => encode(forged), () => forger.seal(encode(forged), key, Buffer.concat([Buffer.from('pier.vault.op|reply|'), nonce])), () => forger.seal(encode(forged), key, 'pier.vault.op|reply')];
      m.respond(variants[answered % 3]());
    },
  });
  await nc.flush();
  const bodies: string[] = [];
  for (let i = 0; i < 30; i++) bodies.push((await vaultCall(system, 'RetrieveSecret', 'keeper', auth, { name: 'motto' })).text);
  t.true(answered > 0, 'the thief was handed some of the reads');
  t.false(bodies.some((b) => b.includes('the-thiefs-value')), 'a forged value reached the app');
  t.true(bodies.some((b) => b.includes('the-real-value')), 'the real vault still answers');
});

test.serial('a thief holding only registry.nats.env publishes a change giving alice a token of its own: no cache believes it', async (t) => {
  const nc = await c.client('registry');
  // The registry's revision, from its heartbeats (signed now; before anchors, plain).
  const revision = await new Promise<number>((resolve) => {
    const sub = nc.subscribe('pier.registry.heartbeat', {
      callback: (_err, m) => {
        for (const at of [0, 64]) {
          try {
            const beat = decode<{ revision?: number }>(m.data.subarray(at));
            if (typeof beat.revision === 'number') {
              sub.unsubscribe();
              return resolve(beat.revision);
            }
          } catch {
            // the other layout
          }
        }
      },
    });
  });
  const forgedToken = `forged-${randomBytes(16).toString('hex')}`;
  const change = encode({ revision: revision + 1, changes: [{ kind: 'token', op: 'put', value: { digest: sha256Hex(forgedToken), user: 'alice' } }] });
  // As a registry before anchors sent it, and with a signature of a key of the thief's own.
  nc.publish('pier.registry.changes', change);
  nc.publish('pier.registry.changes', Buffer.concat([randomBytes(64), change]));
  await nc.flush();
  await sleep(1_000);
  const upgrade = await wsConnect(c.edges[0].ports!.public, 'chat.alice.localhost', { 'x-authorization': forgedToken, 'user-agent': 'forged-token' }).then(
    (client) => (client.ws.close(), 'opened'),
    (err: Error) => err.message,
  );
  t.not(upgrade, 'opened', 'a WebSocket opened with the forged token');
  t.regex(upgrade, /401/);
});

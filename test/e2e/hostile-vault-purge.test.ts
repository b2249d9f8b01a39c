import test from 'ava';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { readCredsFile } from '../../lib/config/nats-auth.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { SecureBus } from '../helpers/secure-bus.js';
import { filesHolding, vaultEntries, type VaultEntry } from '../helpers/vault-streams.js';
import { until } from '../helpers/wait.js';

// Contract §15: `pier vault purge` and uninstall `--purge` destroy at once, and destroyed means
// unreadable even with the master key. The thief here holds the master key and what the vault's
// state login reads (every message of its buckets, fetched by sequence) and the nats-server's
// store directory, raw: after a purge neither holds a sealed value, a kept version, a deleted copy
// or the wrapped data key of the purged workspace. The cluster shape: the vault on JetStream
// (PIER_STATE=jetstream, one node so its block files are on this disk), every role on its own
// identity of `pier bus init`, over TLS.
let dir: string;
let bus: SecureBus;
const procs: PierProcess[] = [];
let env: Record<string, string>;
let jsm: JetStreamManager;
let nc: NatsConnection;
const masterKey = randomBytes(32).toString('hex');
const adminToken = randomBytes(24).toString('hex');

const start = (role: string, extra: Record<string, string> = {}) =>
  PierProcess.start(
    pierEnv(join(dir, role), {
      ...bus.envFor(role),
      PIER_HEARTBEAT_MS: '250',
      ...(['registry', 'vault'].includes(role) ? { PIER_MASTER_KEY: masterKey } : bus.anchorEnv(masterKey)),
      ...(role === 'admin' ? { PIER_ADMIN_TOKEN: adminToken } : {}),
      ...(role === 'vault' ? { PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '1' } : {}),
      ...extra,
    }),
    ['--roles', role],
  );

test.before(async () => {
  dir = tempDir();
  bus = await SecureBus.start(dir, {}, { jetstream: true });
  for (const role of ['registry', 'vault']) procs.push(await start(role));
  procs.push(await start('admin', { PIER_SYSTEM_URL: '127.0.0.1:9' }));
  env = { PATH: process.env.PATH!, PIER_ADMIN_TOKEN: adminToken, PIER_ADMIN_URL: procs[2].adminUrl };
  const added = await cli(['user', 'add', 'alice', '--json'], env);
  if (added.code !== 0) throw new Error(added.stderr);
  // The vault's own state login: what its buckets hold, as the vault itself may read them.
  const login = readCredsFile(join(bus.dir, 'vault.nats.env')).state.vault!;
  nc = await connect({ servers: bus.url, tls: { caFile: bus.ca.cert }, user: login.user, pass: login.password, inboxPrefix: `_INBOX.${login.user}` });
  jsm = await nc.jetstreamManager();
});

test.after.always(async () => {
  await nc?.close();
  await Promise.all(procs.map((p) => p.stop('SIGKILL')));
  await bus?.stop();
  cleanup(dir);
});

/** `pier vault set` of a fresh random value (written to a file: values never travel as flags). */
async function set(workspace: string, envName: string, name: string): Promise<void> {
  const file = join(dir, `value-${randomBytes(4).toString('hex')}`);
  writeFileSync(file, `value-${randomBytes(12).toString('hex')}`);
  const r = await cli(['vault', 'set', '--user', 'alice', '--workspace', workspace, '--env', envName, name, '--value-file', file], env);
  if (r.code !== 0) throw new Error(r.stderr);
}

/** A workspace with everything a purge must take: live secrets in two envs, a kept version, a deleted secret. */
async function fill(workspace: string): Promise<void> {
  await set(workspace, 'prod', 'db');
  await set(workspace, 'prod', 'db'); // version 1 kept
  await set(workspace, 'prod', 'gone');
  const deleted = await cli(['vault', 'delete', '--user', 'alice', '--workspace', workspace, 'gone'], env);
  if (deleted.code !== 0) throw new Error(deleted.stderr);
  await set(workspace, 'dev', 'other');
}

const under = (workspace: string) => (e: VaultEntry) => e.key.startsWith(`alice\u0000${workspace}\u0000`);

/** What of `workspace` is still in the streams and in the store's files: entries other than removals, files holding `needles`. */
async function left(workspace: string, needles: Buffer[]) {
  const entries = (await vaultEntries(jsm)).filter(under(workspace)).filter((e) => !e.removal);
  return { entries: entries.map((e) => `${e.bucket}#${e.seq} ${JSON.stringify(e.key)}`), files: filesHolding(join(bus.dir, 'js'), needles) };
}

/** Before the purge: the workspace's sealed values and wrapped data keys, found in every bucket and on disk (so the checks after can fail). */
async function secretsOf(t: { not(a: unknown, b: unknown, m?: string): void }, workspace: string): Promise<Buffer[]> {
  const entries = (await vaultEntries(jsm)).filter(under(workspace));
  for (const bucket of ['pier-vault-keys', 'pier-vault-secrets', 'pier-vault-versions', 'pier-vault-deleted']) {
    t.not(entries.filter((e) => e.bucket === bucket && !e.removal).length, 0, `before the purge, ${bucket} holds entries of ${workspace}`);
  }
  const needles = entries.flatMap((e) => e.secretBytes);
  t.not(entries.filter((e) => e.bucket === 'pier-vault-keys' && e.secretBytes.length > 0).length, 0, 'the wrapped data keys are among them');
  t.not(filesHolding(join(bus.dir, 'js'), needles).length, 0, "before the purge, the stream's files hold the sealed bytes");
  return needles;
}

test.serial('pier vault purge on JetStream: no sealed value, kept version, deleted copy or data key of the workspace is left in the streams or their files', async (t) => {
  await fill('doomed');
  await set('kept', 'prod', 'stay');
  const needles = await secretsOf(t, 'doomed');
  const keptBefore = (await vaultEntries(jsm)).filter(under('kept')).filter((e) => !e.removal).length;

  const purged = await cli(['vault', 'purge', '--user', 'alice', '--workspace', 'doomed', '--json'], env);
  t.is(purged.code, 0, purged.stderr);
  t.deepEqual(purged.json, { purged: 2 });
  // Answered: so already erased, not at a later sweep.
  t.deepEqual(await left('doomed', needles), { entries: [], files: [] });
  // Another workspace of the same user is untouched, and still opens.
  t.is((await vaultEntries(jsm)).filter(under('kept')).filter((e) => !e.removal).length, keptBefore);
  const got = await cli(['vault', 'get', '--user', 'alice', '--workspace', 'kept', 'stay', '--json'], env);
  t.is(got.code, 0, got.stderr);
  t.regex(got.json.value, /^value-/);
  // The purged workspace reads as empty, and takes new secrets again (under a new data key).
  t.deepEqual((await cli(['vault', 'list', '--user', 'alice', '--workspace', 'doomed', '--env', 'prod', '--json'], env)).json, []);
  await set('doomed', 'prod', 'db');
  t.is((await cli(['vault', 'list', '--user', 'alice', '--workspace', 'doomed', '--env', 'prod', '--json'], env)).json.length, 1);
});

test.serial('pier app uninstall --purge on JetStream: the same, for the workspaces only the app used', async (t) => {
  writeFileSync(join(dir, 'chat.yaml'), 'metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [RetrieveSecret?workspace=chatws] }\n');
  const installed = await cli(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'chat.yaml'), '--json'], env);
  t.is(installed.code, 0, installed.stderr);
  await fill('chatws');
  const needles = await secretsOf(t, 'chatws');

  const removed = await cli(['app', 'uninstall', '--user', 'alice', 'chat', '--purge'], env);
  t.is(removed.code, 0, removed.stderr);
  // The vault purges when it hears the uninstall (the registry's answer does not wait for it).
  const gone = await until("the uninstalled app's workspace to be erased from the vault's streams and their files", async () => {
    const now = await left('chatws', needles);
    if (now.entries.length > 0 || now.files.length > 0) throw new Error(`still there: ${JSON.stringify(now)}`);
    return now;
  }, 20_000, 250);
  t.deepEqual(gone, { entries: [], files: [] });
});

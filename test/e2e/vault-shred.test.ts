import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataKeys } from '../../actors/vault/data-keys.js';
import { scopeKey, secretKey, SECRET_FORMAT, versionKey } from '../../actors/vault/store.js';
import { LmdbVaultStore } from '../../actors/vault/store-lmdb.js';
import { Values } from '../../actors/vault/values.js';
import { Keyring } from '../../lib/crypto/keyring.js';
import { accessToken, vaultCall, vaultPerm, type AppEnv } from '../helpers/app-client.js';
import { startJetStreamCluster } from '../helpers/nats-server.js';
import { cleanup, cli, pierEnv, PierProcess, tempDir } from '../helpers/pier.js';
import { filesUnder, shredScan } from '../helpers/shred-scan.js';
import { patience } from '../helpers/time.js';
import { until } from '../helpers/wait.js';

// Destroyed means gone for good (docs/vault.md "Destroyed"): the raw files of the store
// (LMDB's every page, free ones too; every JetStream node's store folder, raft logs included), read
// with the master key in hand and every key the same bytes yield, open no destroyed value — a
// destroyed version, a deleted secret destroyed whole, versions trimmed past the bound, a purged
// workspace — once "gone" holds: at the answer on LMDB, on JetStream once each node has compacted
// its raft logs on its own timers (waited for here, and said). The live values open (the reading
// can find what is there), and so does a destroyed value sealed with its data key (what 0.3.0 writes).

const OPS = ['CreateSecret', 'RetrieveSecret', 'UpdateSecret', 'DeleteSecret'];
const marker = (s: string) => `${s}-${randomBytes(12).toString('hex')}`;

interface Played {
  live: string[];
  destroyed: string[];
  paths: string[];
  scopes: string[];
  /** The value keys of the values about to be destroyed, as a reading of the files recovered them just before. */
  doomedKeys: string[];
}

const scopes = [scopeKey('alice', 'w', 'prod'), scopeKey('alice', 'gone', 'prod')];
const paths = [secretKey(scopes[0], 'a'), secretKey(scopes[0], 'd'), secretKey(scopes[0], 't'), secretKey(scopes[1], 'p')];

/**
 * The scenario, through an app (HTTP) and the operator (CLI), on a Pier sealing under value keys.
 * Just before the destroys, `files` are read: each value about to be destroyed opens, under a value
 * key recovered from the files (what the reading after must no longer recover).
 */
async function play(t: ExecutionContext, pier: PierProcess, dir: string, files: () => string[], masterKey: Buffer): Promise<Played> {
  const env = { ...pier.env, PIER_ADMIN_URL: pier.adminUrl };
  const run = async (args: string[]) => {
    const r = await cli(args, env);
    if (r.code !== 0) throw new Error(`pier ${args.join(' ')}: ${r.stderr}`);
    return r.json;
  };
  const userToken = (await run(['user', 'add', 'alice', '--json'])).token as string;
  writeFileSync(join(dir, 'app.yaml'), `metadata: { name: chat }\npermission:\n  sysData:\n    - { dataType: secret, group: secret.vault, version: v1, ops: [${['w', 'gone'].flatMap((ws) => OPS.map((o) => `${o}?workspace=${ws}`)).join(', ')}] }\n`);
  const app = (await run(['app', 'install', '--user', 'alice', '--manifest', join(dir, 'app.yaml'), '--json'])).env as AppEnv;
  await until('new values sealed under value keys (every vault replica of this release)', async () => (await run(['vault', 'rekey', '--status', '--json'])).sealingUnderValueKeys === true, 20_000);
  const auth = async (ws: string) => ({ user: userToken, access: await accessToken(app, vaultPerm(ws, OPS)) });
  const [w, gone] = [await auth('w'), await auth('gone')];
  const call = async (op: string, ws: string, body: Record<string, unknown>) => {
    const r = await vaultCall(app.OS_SYSTEM_SERVER, op, ws, ws === 'w' ? w : gone, body);
    if (r.status !== 200) throw new Error(`${op} ${JSON.stringify(body.name)}: ${r.status} ${r.text}`);
  };
  const v = { a1: marker('a1'), a2: marker('a2'), a3: marker('a3'), d: marker('d'), t: [1, 2, 3, 4, 5].map((i) => marker(`t${i}`)), p: marker('p'), p2: marker('p2') };
  await call('CreateSecret', 'w', { name: 'a', value: v.a1 });
  await call('UpdateSecret', 'w', { name: 'a', value: v.a2 });
  await call('UpdateSecret', 'w', { name: 'a', value: v.a3 });
  await call('CreateSecret', 'w', { name: 'd', value: v.d });
  await call('DeleteSecret', 'w', { name: 'd' });
  // Five values of `t` with two versions kept (PIER_VAULT_VERSIONS=2): t1 and t2 are trimmed.
  await call('CreateSecret', 'w', { name: 't', value: v.t[0] });
  for (const value of v.t.slice(1)) await call('UpdateSecret', 'w', { name: 't', value });
  await call('CreateSecret', 'gone', { name: 'p', value: v.p });
  await call('UpdateSecret', 'gone', { name: 'p', value: v.p2 });
  const doomed = [v.a1, v.d, v.p, v.p2];
  const before = shredScan(files(), [masterKey], scopes, paths, doomed);
  const doomedKeys = doomed.map((value) => before.found.find((f) => f.value === value && f.format === 'value key')?.keyId);
  t.deepEqual(doomed.filter((_, i) => doomedKeys[i] === undefined), [], 'before the destroys, each value about to go opens from the files under its own value key');
  t.deepEqual((await run(['vault', 'destroy', '--user', 'alice', '--workspace', 'w', 'a', '--version', '1', '--json'])).destroyed, [1]);
  t.deepEqual((await run(['vault', 'destroy', '--user', 'alice', '--workspace', 'w', 'd', '--json'])).destroyed, [1]);
  t.is((await run(['vault', 'purge', '--user', 'alice', '--workspace', 'gone', '--json'])).purged, 1);
  const formats = await run(['vault', 'rekey', '--status', '--json']);
  t.like(formats, { secrets: { dataKeys: 0 }, versions: { dataKeys: 0 } }, 'every value written here is under a value key');
  return {
    live: [v.a2, v.a3, v.t[2], v.t[3], v.t[4]],
    destroyed: [v.a1, v.d, v.t[0], v.t[1], v.p, v.p2],
    paths,
    scopes,
    doomedKeys: doomedKeys as string[],
  };
}

/**
 * Asserts what a reading of `files` opens: every live value, no destroyed one; and that no value key
 * of a destroyed value is recovered from any byte (whether or not a copy of its box survived).
 */
function judge(t: ExecutionContext, files: string[], masterKey: Buffer, played: Played): void {
  const scan = shredScan(files, [masterKey], played.scopes, played.paths, [...played.live, ...played.destroyed], played.doomedKeys);
  const opened = new Set(scan.found.map((f) => f.value));
  t.deepEqual(played.live.filter((v) => !opened.has(v)), [], 'the reading opens every live value (it would find a destroyed one)');
  t.deepEqual(scan.found.filter((f) => played.destroyed.includes(f.value)), [], 'it opens no destroyed value');
  t.deepEqual(played.doomedKeys.filter((id) => scan.valueKeyIds.includes(id)), [], 'and recovers none of their value keys');
  t.true(scan.valueKeyIds.length >= played.live.length, "the live values' keys are recovered (the reading finds keys where they are)");
}

test('LMDB (the embedded default): at the destroy\'s answer, no page of the environment, free ones included, opens a destroyed value', async (t) => {
  t.timeout(patience(120_000), 'one Pier, the scenario, a reading of its files');
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const masterKey = randomBytes(32);
  const pier = await PierProcess.start(pierEnv(join(dir, 'data'), { PIER_MASTER_KEY: masterKey.toString('hex'), PIER_VAULT_VERSIONS: '2' }));
  t.teardown(() => pier.stop());
  const files = () => filesUnder(join(dir, 'data', 'vault'));
  const played = await play(t, pier, dir, files, masterKey);
  judge(t, files(), masterKey, played);
});

test('the same reading finds a destroyed value sealed with its data key (what 0.3.0 writes): LMDB keeps it in a freed page', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pier-shred-control-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const masterKey = randomBytes(32);
  const store = LmdbVaultStore.open(dir, 'r1');
  t.teardown(() => store.close());
  const keys = new DataKeys(store, new Keyring(masterKey), () => new Date(0));
  const values = new Values(store, keys, () => false);
  const scope = scopeKey('alice', 'w', 'prod');
  const key = secretKey(scope, 'a');
  const [v1, v2] = [marker('v1'), marker('v2')];
  const record = (sealed: Uint8Array, version: number) => ({ ...SECRET_FORMAT, sealed, version, gen: 'g', createdAt: 'a', createdBy: 'x', updatedAt: 'a', updatedBy: 'x', history: [] });
  const first = await store.write((w) => {
    const sealed = values.seal(scope, key, Buffer.from(v1), w);
    w.putSecret(key, record(sealed, 1));
    return sealed;
  });
  await store.write((w) => {
    w.putVersion(versionKey(key, 'g', 1), { format: 1, sealed: first, version: 1, at: 'a', by: 'x' });
    w.putSecret(key, record(values.seal(scope, key, Buffer.from(v2), w), 2));
  });
  await store.write((w) => w.removeVersion(versionKey(key, 'g', 1)));
  t.is(store.version(versionKey(key, 'g', 1)), undefined, 'destroyed');
  const scan = shredScan(filesUnder(dir), [masterKey], [scope], [key], [v1, v2]);
  t.true(scan.found.some((f) => f.value === v2), 'the live value opens');
  t.true(scan.found.some((f) => f.value === v1 && f.format === 'data key'), 'and so does the destroyed one, from a page LMDB freed: why values go under value keys');
});

test('JetStream R3: once every node compacted its raft logs, no file of any node opens a destroyed value', async (t) => {
  t.timeout(patience(360_000), 'a 3-node cluster, one Pier on it, the scenario, and the nodes compacting their raft logs');
  const dir = tempDir();
  t.teardown(() => cleanup(dir));
  const nodes = await startJetStreamCluster(join(dir, 'js'), 3);
  t.teardown(() => Promise.all(nodes.map((n) => n.stop())).then(() => undefined));
  const masterKey = randomBytes(32);
  const pier = await PierProcess.start(
    pierEnv(join(dir, 'data'), { NATS_URL: nodes.map((n) => n.url).join(','), PIER_STATE: 'jetstream', PIER_JS_REPLICAS: '3', PIER_MASTER_KEY: masterKey.toString('hex'), PIER_VAULT_VERSIONS: '2' }),
    [],
    patience(60_000),
  );
  t.teardown(() => pier.stop());
  const stores = nodes.map((_, i) => join(dir, 'js', `js-${i + 1}`));
  const played = await play(t, pier, dir, () => filesUnder(...stores), masterKey);
  const destroyedLeft = () => {
    const scan = shredScan(filesUnder(...stores), [masterKey], played.scopes, played.paths, played.destroyed, played.doomedKeys);
    return scan.found.length > 0 || played.doomedKeys.some((id) => scan.valueKeyIds.includes(id));
  };
  const began = Date.now();
  // nats-server compacts a stream's raft log at a snapshot, on its own timers (about 2 minutes).
  await until("every node to have compacted the raft logs that held a destroyed value's key", () => !destroyedLeft(), 300_000, 5_000);
  t.log(`gone on every node ${Math.round((Date.now() - began) / 1000)} s after the last destroy answered`);
  judge(t, filesUnder(...stores), masterKey, played);
});

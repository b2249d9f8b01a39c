import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { JetStreamManager } from 'nats';
import { DataKeys } from '../../actors/vault/data-keys.js';
import { Values } from '../../actors/vault/values.js';
import type { VaultDeps } from '../../actors/vault/handler.js';
import { operatorOp } from '../../actors/vault/operator.js';
import { finishPurges, purge } from '../../actors/vault/purge.js';
import { JetStreamVaultStore } from '../../actors/vault/store-jetstream.js';
import type { AuditEntry, OperatorVaultRequest } from '../../bus/subjects.js';
import { AccessTokens } from '../../lib/crypto/access-token.js';
import { loadConfig } from '../../lib/config/config.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { jetStreamReplicas } from '../helpers/jetstream-replicas.js';
import { filesHolding, vaultEntries } from '../helpers/vault-streams.js';

// A purge cut short (docs/vault.md "Purge"): the replica running it dies between its commits, or
// before its erasures. The hourly sweep of any replica, one started afterwards included, finishes
// it: nothing of the workspace is left in the streams or their files. (The sweep is index.ts's
// finishCutShort: finishPurges, then eraseRemoved; secrets' own earlier records go with `scrub`.)

const config = (() => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pier-purge-config-'));
  const c = loadConfig({ PIER_DATA_DIR: dataDir, PIER_ROLES: 'vault', NATS_URL: 'nats://127.0.0.1:4222', PIER_MASTER_KEY: randomBytes(32).toString('hex') });
  rmSync(dataDir, { recursive: true, force: true });
  return c;
})();

/** The vault's handler state over one replica's store (the sweep's margin off: the server's clock is the only one here). */
function depsOf(store: JetStreamVaultStore, audited: AuditEntry[]): VaultDeps {
  const keys = new DataKeys(store, config.keyring, () => new Date());
  return {
    store,
    keys,
    values: new Values(store, keys, () => false),
    cache: { userExists: (u: string) => u === 'alice' } as unknown as RegistryCache,
    tokens: new AccessTokens(config.keyring),
    vaultGroup: 'secret.vault',
    now: () => Date.now(),
    audit: (e) => void audited.push(e),
    anonymous: () => undefined,
    auditInWrite: (w, e) => (audited.push(e), w.appendAudit(e)),
    bounds: { ...config.vaultVersions, scrubAfterMs: Number.NEGATIVE_INFINITY },
  };
}

/**
 * Replicas on one JetStream node (R1, its files on this disk); `dying` ones never get to erase
 * anything (their erasures fail, as a process killed before them would not have made them).
 */
async function setup(t: { teardown(fn: () => Promise<void>): void }) {
  let jsm: JetStreamManager | undefined;
  let dying = false;
  const pair = await jetStreamReplicas(1, async (js, manager, replicas) => {
    jsm ??= await manager();
    const doomed = dying;
    const managerOf = async () => {
      const real = await manager();
      if (!doomed) return real;
      const streams = Object.assign(Object.create(real.streams), { deleteMessage: () => Promise.reject(new Error('killed before its erasures')) });
      return Object.assign(Object.create(real), { streams }) as JetStreamManager;
    };
    return JetStreamVaultStore.open(js, managerOf, { replicas, auditMaxAgeMs: 86_400_000, auditMaxEntries: 10_000 });
  });
  t.teardown(() => pair.close());
  const audited: AuditEntry[] = [];
  const operator = (deps: VaultDeps, req: Omit<OperatorVaultRequest, 'user' | 'workspace'>) => operatorOp(deps, { user: 'alice', workspace: 'w', ...req });
  const deps = depsOf(pair.a, audited);
  // Everything a purge must take: live secrets in two envs, a kept version, a deleted secret; and a workspace that stays.
  for (const [env, name] of [['prod', 'db'], ['prod', 'db'], ['prod', 'gone'], ['dev', 'other']] as const) await operator(deps, { op: 'set', env, name, value: `v-${randomBytes(8).toString('hex')}` });
  await operator(deps, { op: 'delete', name: 'gone' });
  await operatorOp(deps, { op: 'set', user: 'alice', workspace: 'stays', name: 'k', value: 'kept-value' });
  const workspace = async () => (await vaultEntries(jsm!)).filter((e) => e.key.startsWith('alice\u0000w\u0000'));
  const needles = (await workspace()).flatMap((e) => e.secretBytes);
  /** What is left of workspace `w`: its entries other than removals, and the store's files holding its sealed bytes. */
  const left = async () => ({ entries: (await workspace()).filter((e) => !e.removal).map((e) => `${e.bucket} ${JSON.stringify(e.key)}`), files: filesHolding(pair.storeDir, needles) });
  /** A replica started now: with `dying`, one whose erasures never happen. */
  const replica = async (opts: { dying?: boolean } = {}) => {
    dying = opts.dying === true;
    const store = (await pair.another()) as JetStreamVaultStore;
    dying = false;
    await store.sync();
    return { store, deps: depsOf(store, audited) };
  };
  /** The sweep's steps for what a purge cut short (index.ts finishCutShort), and its scrub. */
  const sweep = async (r: { store: JetStreamVaultStore; deps: VaultDeps }) => {
    await r.store.sync();
    const finished = await finishPurges(r.deps, '(retention)');
    await r.store.eraseRemoved();
    await r.store.scrub(Number.POSITIVE_INFINITY);
    return finished;
  };
  return { deps, audited, needles, left, replica, sweep, operator };
}

test('a purge cut short after its first commits (the data keys removed, nothing erased): the sweep of a replica started later finishes it', async (t) => {
  const { audited, needles, left, replica, sweep } = await setup(t);
  t.not(needles.length, 0);
  t.not((await left()).files.length, 0, "before: the stream's files hold the workspace's sealed bytes (the check below can fail)");
  // The purge's first changes, as purge() makes them, by a replica that dies right after.
  const dying = await replica({ dying: true });
  await dying.store.write((w) => {
    for (const scope of w.scopesOf('alice', 'w')) dying.deps.keys.remove(scope, w);
  });
  t.deepEqual(dying.store.scopesOf('alice', 'w'), [], 'the data keys are gone');
  t.not(dying.store.listScope('alice\u0000w\u0000prod').length, 0, 'the secrets are still there (the purge was cut short)');

  const later = await replica();
  t.is(await sweep(later), 2, 'both envs finished');
  t.deepEqual(await left(), { entries: [], files: [] });
  t.deepEqual(later.store.listScope('alice\u0000w\u0000prod'), []);
  t.deepEqual(later.store.listDeleted('alice\u0000w\u0000prod'), []);
  t.deepEqual(
    audited.filter((e) => e.app === '(retention)').map((e) => [e.op, e.workspace, e.env]),
    [
      ['Purge', 'w', 'dev'],
      ['Purge', 'w', 'prod'],
    ],
  );
  // The other workspace is untouched, and opens.
  t.like(await operatorOp(later.deps, { op: 'get', user: 'alice', workspace: 'stays', name: 'k' }), { data: { value: 'kept-value' } });
  // A second sweep finds nothing more to do.
  t.is(await sweep(later), 0);
});

test('a purge whose erasures were cut short is answered as such; purging again, or the sweep of a replica started later, erases what it left', async (t) => {
  const { left, replica, sweep, needles } = await setup(t);
  const dying = await replica({ dying: true });
  const err = await t.throwsAsync(purge(dying.deps, 'alice', ['w'], () => undefined));
  t.is((err as { code?: string }).code, 'UNAVAILABLE');
  t.regex(err!.message, /purged, but not all of its earlier records could be erased/);
  const cutShort = await left();
  t.deepEqual(cutShort.entries.filter((e) => e.startsWith('pier-vault-keys')).length, 2, 'the wrapped data keys are still in the stream');
  t.not(cutShort.files.length, 0);

  const later = await replica();
  t.is(await sweep(later), 0, 'no scope without its key: the records went, only their bytes stayed');
  t.deepEqual(await left(), { entries: [], files: [] });
  t.not(needles.length, 0);
});

test('purging again, on a replica that followed the cut-short purge, erases at once what it left', async (t) => {
  const { deps, left, replica } = await setup(t);
  const dying = await replica({ dying: true });
  await t.throwsAsync(purge(dying.deps, 'alice', ['w'], () => undefined), { message: /not all of its earlier records/ });
  t.not((await left()).entries.length, 0);
  // The first replica's view followed the removals as they were made: it knows what is left to erase.
  await deps.store.sync();
  t.is(await purge(deps, 'alice', ['w'], () => undefined), 0, 'nothing live left to purge');
  t.deepEqual(await left(), { entries: [], files: [] });
});

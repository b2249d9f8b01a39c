import { tell } from '../../bus/verbs.js';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { registryEvents } from '../../bus/subjects.js';
import { defineActor, startActor, type RunningActor } from '../../lib/runtime/actor.js';
import { checkStoreKey } from '../../lib/crypto/master-key-check.js';
import type { RoleContext } from '../../lib/runtime/runtime.js';
import { registryDeclaration } from './declaration.js';
import * as h from './handler.js';
import { registryExportPage, registryImportBatch } from './state-io.js';
import { LmdbRegistryStore, type RegistryStore } from './store.js';
import { JetStreamRegistryStore } from './store-jetstream.js';

/** LMDB under the data dir (replicas on one host share it), or the replicated log on JetStream (replicas anywhere). */
async function openRegistryStore(ctx: RoleContext): Promise<RegistryStore> {
  const { state } = ctx.config;
  if (state.kind === 'lmdb') return LmdbRegistryStore.open(join(ctx.config.dataDir, 'registry'));
  if (!ctx.jetstream) throw new Error('PIER_STATE=jetstream needs NATS_URL');
  const onError = (err: unknown, what: string) => ctx.log.error({ err }, `registry log: ${what} failed`);
  return JetStreamRegistryStore.open(ctx.jetstream.js, ctx.jetstream.manager, { replicas: state.replicas, onError });
}

interface RegistryActor {
  ctx: RoleContext;
  store: RegistryStore;
  deps: h.RegistryDeps;
  /** This replica's heartbeats: a random id and a count, so a copy played back later is no news. */
  beats: { instance: string; seq: number };
}

async function onStart(ctx: RoleContext): Promise<RegistryActor> {
  const store = await openRegistryStore(ctx);
  try {
    checkStoreKey(ctx.config.keyring, 'registry', store.listApps().map((a) => ({ what: `app ${a.id}`, value: a.secretSealed })));
  } catch (err) {
    await store.close();
    throw err;
  }
  const deps: h.RegistryDeps = {
    store,
    keyring: ctx.config.keyring,
    now: () => new Date(ctx.now()),
    publish: (event) => tell(ctx.bus, registryEvents.changes, event),
  };
  const actor = { ctx, store, deps, beats: { instance: randomBytes(8).toString('hex'), seq: 0 } };
  beat(actor);
  ctx.log.info({ revision: store.revision() }, 'registry actor started');
  return actor;
}

/** The current revision, for caches that missed a change event to catch up within one beat. */
function beat(a: RegistryActor): void {
  try {
    tell(a.ctx.bus, registryEvents.heartbeat, { revision: a.store.revision(), instance: a.beats.instance, seq: ++a.beats.seq });
  } catch (err) {
    a.ctx.log.warn({ err: (err as Error).message }, 'registry heartbeat not sent');
  }
}

/** Reads answer what any replica has written so far (writes catch up inside `write`). */
const current = async <R>(a: RegistryActor, read: () => R | Promise<R>): Promise<R> => (await a.store.sync(), read());

/**
 * The registry actor: users, their auth tokens, apps, grants and provider registries, in LMDB under
 * `<data>/registry` or a replicated log on JetStream. Every committed write is published on
 * `pier.registry.changes`; a heartbeat carries the current revision.
 */
export const registryActor = defineActor(registryDeclaration, {
  serves: {
    userAdd: (a: RegistryActor, r) => h.userAdd(a.deps, r.name),
    userToken: (a: RegistryActor, r) => h.userToken(a.deps, r.name),
    userRevoke: (a: RegistryActor, r) => h.userRevoke(a.deps, r.name),
    userList: (a: RegistryActor) => current(a, () => h.userList(a.deps)),
    appInstall: (a: RegistryActor, r) => h.appInstall(a.deps, r),
    appList: (a: RegistryActor, r) => current(a, () => h.appList(a.deps, r.user)),
    appUninstall: (a: RegistryActor, r) => h.appUninstall(a.deps, r.user, r.app, r.purge),
    appCredentials: (a: RegistryActor, r) => current(a, () => h.appCredentials(a.deps, r.appKey)),
    appCallbackKey: (a: RegistryActor, r) => current(a, () => h.appCallbackKey(a.deps, r.appKey)),
    appVerify: (a: RegistryActor, r) => current(a, () => h.appVerify(a.deps, r.appKey, r.secret)),
    providerList: (a: RegistryActor) => current(a, () => a.store.listProviders()),
    providerSetState: (a: RegistryActor, r) => h.providerSetState(a.deps, r.name, r.state),
    snapshot: (a: RegistryActor) => current(a, () => a.store.snapshot()),
    appReseal: (a: RegistryActor) => h.appReseal(a.deps),
    export: (a: RegistryActor, r) => registryExportPage(a.store, r.offset, r.limit),
    import: async (a: RegistryActor, r) => {
      const { imported, event } = await registryImportBatch(a.store, r.records, a.ctx.config.keyring);
      if (event) a.deps.publish(event);
      return { imported };
    },
    empty: (a: RegistryActor) => current(a, () => ({ empty: a.store.listUsers().length === 0 && a.store.listApps().length === 0 })),
  },
  timers: { heartbeat: { everyMs: (ctx) => ctx.config.registry.heartbeatMs, run: beat } },
  onStart,
  onStop: (a) => a.store.close(),
});

/**
 * The registry on its own, for a bench or a test: it reads neither the registry cache nor the
 * peers (it is what the cache reads), so a context without them is enough.
 */
export function startRegistry(ctx: Pick<RoleContext, 'bus' | 'config' | 'log' | 'metrics' | 'now'> & Partial<Pick<RoleContext, 'jetstream'>>): Promise<RunningActor> {
  return startActor(registryActor, { jetstream: null, ...ctx } as RoleContext);
}

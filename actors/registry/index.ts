import { join } from 'node:path';
import { publishEvent, serve } from '../../bus/rpc.js';
import { registry, registryEvents, stateEndpoints } from '../../bus/subjects.js';
import { registryExportPage, registryImportBatch } from './state-io.js';
import { checkStoreKey } from '../../lib/master-key-check.js';
import type { RoleContext, Running } from '../../lib/runtime.js';
import * as h from './handler.js';
import { LmdbRegistryStore, type RegistryStore } from './store.js';
import { JetStreamRegistryStore } from './store-jetstream.js';

/** LMDB under the data dir (replicas on one host share it), or the replicated log on JetStream (replicas anywhere). */
async function openRegistryStore(ctx: Pick<RoleContext, 'config' | 'log'> & Partial<Pick<RoleContext, 'jetstream'>>): Promise<RegistryStore> {
  const { state } = ctx.config;
  if (state.kind === 'lmdb') return LmdbRegistryStore.open(join(ctx.config.dataDir, 'registry'));
  if (!ctx.jetstream) throw new Error('PIER_STATE=jetstream needs NATS_URL');
  const onError = (err: unknown, what: string) => ctx.log.error({ err }, `registry log: ${what} failed`);
  return JetStreamRegistryStore.open(ctx.jetstream.js, ctx.jetstream.manager, { replicas: state.replicas, onError });
}

/**
 * The registry actor: users, their auth tokens, apps, grants and provider registries, in LMDB under
 * `<data>/registry`. Every committed write is published on `pier.registry.changes`; a heartbeat
 * carries the current revision so that caches which missed an event catch up within one beat.
 */
export async function startRegistry(ctx: Pick<RoleContext, 'bus' | 'config' | 'log' | 'metrics' | 'now'> & Partial<Pick<RoleContext, 'jetstream'>>): Promise<Running> {
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
    publish: (event) => publishEvent(ctx.bus, registryEvents.changes, event),
  };
  const hooks = { observe: ctx.metrics.observeActor };
  // Reads answer what any replica has written so far (writes catch up inside `write`).
  const current = <R>(read: () => R) => store.sync().then(read);
  const subs = [
    serve(ctx.bus, registry.userAdd, (r) => h.userAdd(deps, r.name), hooks),
    serve(ctx.bus, registry.userToken, (r) => h.userToken(deps, r.name), hooks),
    serve(ctx.bus, registry.userRevoke, (r) => h.userRevoke(deps, r.name), hooks),
    serve(ctx.bus, registry.userList, () => current(() => h.userList(deps)), hooks),
    serve(ctx.bus, registry.appInstall, (r) => h.appInstall(deps, r), hooks),
    serve(ctx.bus, registry.appList, (r) => current(() => h.appList(deps, r.user)), hooks),
    serve(ctx.bus, registry.appUninstall, (r) => h.appUninstall(deps, r.user, r.app, r.purge), hooks),
    serve(ctx.bus, registry.appCredentials, (r) => current(() => h.appCredentials(deps, r.appKey)), hooks),
    serve(ctx.bus, registry.appVerify, (r) => current(() => h.appVerify(deps, r.appKey, r.secret)), hooks),
    serve(ctx.bus, registry.providerList, () => current(() => store.listProviders()), hooks),
    serve(ctx.bus, registry.providerSetState, (r) => h.providerSetState(deps, r.name, r.state), hooks),
    serve(ctx.bus, registry.snapshot, () => current(() => store.snapshot()), hooks),
    serve(ctx.bus, registry.appReseal, () => h.appReseal(deps), hooks),
    serve(ctx.bus, stateEndpoints.registryExport, (r) => registryExportPage(store, r.offset, r.limit), hooks),
    serve(
      ctx.bus,
      stateEndpoints.registryImport,
      async (r) => {
        const { imported, event } = await registryImportBatch(store, r.records, ctx.config.keyring);
        if (event) deps.publish(event);
        return { imported };
      },
      hooks,
    ),
    serve(ctx.bus, stateEndpoints.registryEmpty, () => current(() => ({ empty: store.listUsers().length === 0 && store.listApps().length === 0 })), hooks),
  ];
  const beat = () => {
    try {
      publishEvent(ctx.bus, registryEvents.heartbeat, { revision: store.revision() });
    } catch (err) {
      ctx.log.warn({ err: (err as Error).message }, 'registry heartbeat not sent');
    }
  };
  beat();
  const timer = setInterval(beat, ctx.config.registry.heartbeatMs);
  ctx.log.info({ revision: store.revision() }, 'registry actor started');

  return {
    async stop() {
      clearInterval(timer);
      for (const s of subs) s.unsubscribe();
      await store.close();
    },
  };
}

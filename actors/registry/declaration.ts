import { registry, registryEvents, registryState, stateEndpoints } from '../../bus/subjects.js';
import { declareActor } from '../../lib/runtime/actor-declaration.js';

/**
 * The registry actor on the bus (queue group `registry`), its role's rights; its implementation is
 * index.ts, loaded only where the role runs.
 */
export const registryDeclaration = declareActor({
  role: 'registry',
  serves: {
    userAdd: registry.userAdd,
    userToken: registry.userToken,
    userRevoke: registry.userRevoke,
    userList: registry.userList,
    appInstall: registry.appInstall,
    appList: registry.appList,
    appUninstall: registry.appUninstall,
    appCredentials: registry.appCredentials,
    appCallbackKey: registry.appCallbackKey,
    appVerify: registry.appVerify,
    providerList: registry.providerList,
    providerSetState: registry.providerSetState,
    snapshot: registry.snapshot,
    appReseal: registry.appReseal,
    export: stateEndpoints.registryExport,
    import: stateEndpoints.registryImport,
    empty: stateEndpoints.registryEmpty,
  },
  emits: [registryEvents.changes, registryEvents.heartbeat],
  jetstream: { streams: [], buckets: [], subjects: [], logs: [registryState] },
});

import type { Declaration } from '../bus/permissions.js';
import { streamSubject } from '../bus/subjects-stream.js';
import { gatewaySubjects, history, processSubjects, provider, registry, stateEndpoints, token, upload, uploadSubjects, vault } from '../bus/subjects.js';

const any = '*';

/**
 * What the edge and the admin listener may do on the bus (bus/permissions.ts turns these into
 * allow-lists; the actors' are their declarations, `actors/<name>/declaration.ts`). They serve almost nothing: they are
 * the callers.
 */

/** The browser- and app-facing listeners. No admin subject, no app secret, no registry write. */
export const edgeRole: Declaration = {
  calls: [
    token.issue,
    provider.call,
    provider.authorize,
    vault.op,
    vault.authorize,
    upload.create,
    upload.get,
    upload.begin,
    upload.describe,
    upload.terminate,
    uploadSubjects.session(any, any),
    registry.appVerify,
    // The gateway: events to callback replicas; the local API's commands to the edges holding connections.
    gatewaySubjects.deliver(any),
    gatewaySubjects.hello(any),
    gatewaySubjects.moved(any),
    gatewaySubjects.edge(any),
    gatewaySubjects.user(any, any),
    gatewaySubjects.list,
    // Pulling a provider's large answer.
    streamSubject('provider', '>'),
    // The gateway's history: kept and read by the history actor (actors/history/, this role's own).
    history.keep,
    history.head,
    history.recover,
    history.after,
  ],
  // The history actor's subjects and JetStream state are its own declaration's (cli/roles.ts adds them to this role's).
  serves: [gatewaySubjects.edge(any), gatewaySubjects.user(any, any), gatewaySubjects.list, gatewaySubjects.settled(any), gatewaySubjects.alive(any), streamSubject('edge', '>')],
};

/** The operator's listener (loopback): users, apps, providers, the vault's audit and key rotation, state export. */
export const adminRole: Declaration = {
  calls: [
    registry.userAdd,
    registry.userToken,
    registry.userRevoke,
    registry.userList,
    registry.appInstall,
    registry.appList,
    registry.appUninstall,
    registry.providerList,
    registry.providerSetState,
    registry.appReseal,
    upload.prepare,
    upload.list,
    // The console's connections view: list one app's connections on every edge, close one.
    gatewaySubjects.list,
    gatewaySubjects.edge(any),
    vault.audit,
    vault.rotate,
    vault.operator,
    vault.versions,
    vault.rekey,
    processSubjects.describe,
    ...Object.values(stateEndpoints),
  ],
};

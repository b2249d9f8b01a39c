import { exchange } from './exchange.js';

/**
 * What the registry tells everyone: the values every read cache is built from, the changes and
 * heartbeats it publishes, and its state on JetStream. Its endpoints are in `subjects-registry.ts`.
 */

// ---- Values the registry shares with everyone (read caches are built from these) ----

export interface UserView {
  name: string;
  createdAt: string;
}

/** A user auth token as the caches know it: only the SHA-256 of the token, never the token. */
export interface TokenView {
  digest: string;
  user: string;
}

/** One `permission.sysData` entry of a manifest. */
export interface Grant {
  dataType: string;
  group: string;
  version: string;
  ops: string[];
  appName?: string;
  port?: number;
  svc?: string;
  namespace?: string;
}

export interface WebsocketOptions {
  url: string;
  port: number;
  /** The manifest's `options.websocket.history`: off, or bounds lower than the operator's (docs/protocol.md "Manifest"). Absent: the operator's. */
  history?: false | HistoryOptions;
}

export interface HistoryOptions {
  messages?: number;
  bytes?: number;
  /** Seconds. */
  ttl?: number;
}

export interface UploadOptions {
  fileType: string[];
  dest: string;
  limitedSize: number;
  /** `upload.callback`: where the app hears of each completed upload (its host; this port and path). */
  callback?: { url: string; port: number };
}

/** An installed app as every cache knows it: nothing of its secret (the registry checks it, `appVerify`). */
export interface AppView {
  /** `<user>/<app>` */
  id: string;
  user: string;
  name: string;
  version: string;
  host: string;
  appKey: string;
  grants: Grant[];
  websocket: WebsocketOptions | null;
  upload: UploadOptions | null;
  providers: string[];
  installedAt: string;
  /** Installed with `--shared-dest`: its upload folder may nest with other apps' of its user (docs/protocol.md "Upload"). */
  sharedDest?: boolean;
}

export interface OpApi {
  name: string;
  uri: string;
}

export const PROVIDER_STATES = ['active', 'suspended'] as const;
export type ProviderState = (typeof PROVIDER_STATES)[number];

export interface ProviderView {
  name: string;
  user: string;
  app: string;
  namespace: string;
  version: 'v1' | 'v2';
  dataType: string;
  group: string;
  endpoint: string;
  deployment: string;
  description: string;
  opApis: OpApi[];
  state: ProviderState;
  appliedAt: string;
}

export interface Snapshot {
  revision: number;
  users: UserView[];
  tokens: TokenView[];
  apps: AppView[];
  providers: ProviderView[];
}

export type Change =
  | { kind: 'user'; op: 'put'; value: UserView }
  | { kind: 'token'; op: 'put'; value: TokenView }
  | { kind: 'token'; op: 'delete'; key: string }
  | { kind: 'app'; op: 'put'; value: AppView }
  | { kind: 'app'; op: 'delete'; key: string; purge: boolean; value: AppView }
  | { kind: 'provider'; op: 'put'; value: ProviderView }
  | { kind: 'provider'; op: 'delete'; key: string };

/** Everything one registry write transaction changed, stamped with the revision it produced. */
export interface ChangeEvent {
  revision: number;
  changes: Change[];
}

/**
 * A registry replica's heartbeat: its revision, and (signed with it) the replica's random id and a
 * count, so a heartbeat recorded and played back later is not taken for the registry being alive.
 */
export interface RegistryHeartbeat {
  revision: number;
  instance: string;
  seq: number;
}

export const registryEvents = {
  /** Published after each committed write, in revision order per registry replica. */
  changes: exchange<ChangeEvent>({ subject: 'pier.registry.changes', request: {
    revision: { type: 'number', integer: true, min: 0 },
    changes: {
      type: 'array',
      max: 100_000,
      items: {
        type: 'object',
        props: {
          kind: { type: 'enum', values: ['user', 'token', 'app', 'provider'] },
          op: { type: 'enum', values: ['put', 'delete'] },
          key: { type: 'string', optional: true, max: 512 },
          value: { type: 'object', optional: true },
          purge: { type: 'boolean', optional: true },
        },
      },
    },
  }, oneWay: true, seal: { signedBy: 'registry' } }),
  /** Published every `heartbeatMs` by each registry replica: caches that are behind resync. */
  heartbeat: exchange<RegistryHeartbeat>({ subject: 'pier.registry.heartbeat', request: { revision: { type: 'number', integer: true, min: 0 }, instance: { type: 'string', min: 1, max: 32 }, seq: { type: 'number', integer: true, min: 1 } }, oneWay: true, seal: { signedBy: 'registry' } }),
};

/** The registry's state on JetStream (PIER_STATE=jetstream): one replicated log of its writes, compacted by snapshots. */
export const registryState = {
  stream: 'PIER_REGISTRY',
  subject: 'pier.state.registry',
  snapshotStream: 'PIER_REGISTRY_SNAPSHOTS',
  snapshotPrefix: 'pier.state.snapshots.registry',
} as const;

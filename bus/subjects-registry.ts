
/** Names of users and apps (docs/protocol.md "Identities"): the platform's rules. */
export const USER_NAME = /^[a-z][a-z0-9-]{0,30}$/;
export const APP_NAME = /^[a-z][a-z0-9]{0,30}$/;
/** The same rules in words, as every message, the CLI's help and the console say them. */
export const USER_NAME_RULE = 'must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes';
export const APP_NAME_RULE = 'must be 1 to 31 characters: a lowercase letter, then lowercase letters or digits (no dashes)';

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

// ---- Replies ----

export interface IssuedToken {
  name: string;
  token: string;
}

export interface UserSummary {
  name: string;
  createdAt: string;
  tokens: number;
}

export interface InstalledApp {
  app: string;
  user: string;
  appKey: string;
  appSecret: string;
  /** The manifest's `upload.dest` (app's view), for the upload role to create the user's folder. */
  uploadDest: string | null;
}

export interface AppSummary {
  app: string;
  user: string;
  version: string;
  host: string;
  appKey: string;
  providers: string[];
  installedAt: string;
  /** Whether the operator installed it with `--shared-dest`. */
  sharedDest: boolean;
}

/** Existing credentials brought to an install (see `appInstall`). */
export interface ImportedCredentials {
  OS_APP_KEY: string;
  OS_APP_SECRET: string;
}

/**
 * Imported keys and secrets must keep the guarantees of generated ones: the secret carries at
 * least 128 bits (22 base64url characters) and key + 10-digit timestamp + secret fit bcrypt's 72 bytes.
 */
export const credentialsSchema = {
  OS_APP_KEY: { type: 'string', pattern: /^[A-Za-z0-9_-]{8,32}$/, messages: { stringPattern: 'must be 8-32 characters of [A-Za-z0-9_-]' } },
  OS_APP_SECRET: { type: 'string', pattern: /^[A-Za-z0-9_-]{22,54}$/, messages: { stringPattern: 'must be 22-54 characters of [A-Za-z0-9_-] (at least 128 bits)' } },
} as const;

export interface AppCallbackKey {
  user: string;
  app: string;
  appKey: string;
  callbackKey: string;
}

export interface AppCredentials {
  user: string;
  app: string;
  appKey: string;
  appSecret: string;
}

const userName = { type: 'string', pattern: USER_NAME, messages: { stringPattern: USER_NAME_RULE } } as const;
const appName = { type: 'string', pattern: APP_NAME, messages: { stringPattern: APP_NAME_RULE } } as const;
const MANIFEST_MAX = 256 * 1024;

const Q = 'registry';

/**
 * The registry actor's endpoints (queue group `registry`). Writes are serialised by LMDB, so any
 * number of replicas sharing one data dir may serve them.
 */
export const registry = {
  /** {name} → {name, token}: creates a user and its first auth token. 409 when the user exists. */
  userAdd: endpoint<{ name: string }, IssuedToken>('pier.registry.user.add', Q, { name: userName }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  /** {name} → {name, token}: issues one more auth token. 404 for an unknown user. */
  userToken: endpoint<{ name: string }, IssuedToken>('pier.registry.user.token', Q, { name: userName }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  /** {name} → {name, revoked}: revokes every auth token of the user. */
  userRevoke: endpoint<{ name: string }, { name: string; revoked: number }>('pier.registry.user.revoke', Q, { name: userName }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  userList: endpoint<Record<string, never>, UserSummary[]>('pier.registry.user.list', Q, {}, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),

  /**
   * Installs an app from manifest text (YAML) plus ProviderRegistry documents. 409 when installed.
   * `credentials` keeps an app's existing key and secret (moving it from another platform);
   * otherwise new ones are generated. 409 too when its `upload.dest` nests with another app's of
   * the same user, or is `/`, unless `sharedDest` (docs/protocol.md "Upload").
   */
  appInstall: endpoint<{ user: string; manifest: string; providers: string[]; host: string; credentials?: ImportedCredentials; sharedDest?: boolean }, InstalledApp>('pier.registry.app.install', Q, {
    user: userName,
    manifest: { type: 'string', max: MANIFEST_MAX },
    providers: { type: 'array', max: 32, items: { type: 'string', max: MANIFEST_MAX } },
    host: { type: 'string', min: 1, max: 253, pattern: /^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$/ },
    credentials: { type: 'object', optional: true, strict: true, props: credentialsSchema },
    sharedDest: { type: 'boolean', optional: true },
  }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  appList: endpoint<{ user?: string }, AppSummary[]>('pier.registry.app.list', Q, { user: { ...userName, optional: true } }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  /** Removes the app and its key at once; its providers become `suspended`. 404 when not installed. */
  appUninstall: endpoint<{ user: string; app: string; purge: boolean }, { app: string; user: string; purged: boolean }>('pier.registry.app.uninstall', Q, {
    user: userName,
    app: appName,
    purge: 'boolean',
  }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  /**
   * The app secret in clear, for the one role that must check proofs with it (token): the answer is
   * sealed to the token role's anchored key whoever asks, and made with the registry's.
   */
  appCredentials: endpoint<{ appKey: string }, AppCredentials>('pier.registry.app.credentials', Q, { appKey: { type: 'string', min: 1, max: 128 } }, undefined, { replyTo: 'token', grant: 'registry' }),
  /**
   * The app's callback key (`HMAC-SHA256(app secret, "pier callback key v1")`), for the callback
   * role that signs callbacks with it: sealed to the callback role's anchored key, made with the registry's.
   */
  appCallbackKey: endpoint<{ appKey: string }, AppCallbackKey>('pier.registry.app.callbackkey', Q, { appKey: { type: 'string', min: 1, max: 128 } }, undefined, { replyTo: 'callback', grant: 'registry' }),
  /**
   * Whether `secret` is the app's, compared in constant time by the registry: how the edge checks
   * `X-App-Key`/`X-App-Secret` without ever holding secrets. Answers the app's id, or 401.
   */
  appVerify: endpoint<{ appKey: string; secret: string }, { app: string }>('pier.registry.app.verify', Q, {
    appKey: { type: 'string', min: 1, max: 128 },
    secret: { type: 'string', max: 256 },
  }, undefined, { request: 'registry', grant: 'registry' }),

  providerList: endpoint<Record<string, never>, ProviderView[]>('pier.registry.provider.list', Q, {}, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),
  providerSetState: endpoint<{ name: string; state: ProviderState }, ProviderView>('pier.registry.provider.state', Q, {
    name: { type: 'string', min: 1, max: 253 },
    state: { type: 'enum', values: [...PROVIDER_STATES] },
  }, undefined, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),

  /** Re-seals app secrets under the current master key (part of `pier vault rotate-master-key`). */
  appReseal: endpoint<Record<string, never>, { resealed: number }>('pier.registry.app.reseal', Q, {}, 60_000, { request: 'registry', from: 'admin', reply: true, grant: 'registry' }),

  /**
   * The whole registry as the caches see it, with its revision: every process believes what it
   * says of users, tokens, apps and grants, so it is a grant made with the registry's anchored key.
   */
  snapshot: endpoint<Record<string, never>, Snapshot>('pier.registry.snapshot', Q, {}, undefined, { grant: 'registry' }),
};

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
  changes: event<ChangeEvent>('pier.registry.changes', {
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
  }, { signedBy: 'registry' }),
  /** Published every `heartbeatMs` by each registry replica: caches that are behind resync. */
  heartbeat: event<RegistryHeartbeat>(
    'pier.registry.heartbeat',
    { revision: { type: 'number', integer: true, min: 0 }, instance: { type: 'string', min: 1, max: 32 }, seq: { type: 'number', integer: true, min: 1 } },
    { signedBy: 'registry' },
  ),
};

/** The registry's state on JetStream (PIER_STATE=jetstream): one replicated log of its writes, compacted by snapshots. */
export const registryState = {
  stream: 'PIER_REGISTRY',
  subject: 'pier.state.registry',
  snapshotStream: 'PIER_REGISTRY_SNAPSHOTS',
  snapshotPrefix: 'pier.state.snapshots.registry',
} as const;import { endpoint, event } from './exchange.js';


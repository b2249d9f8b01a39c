import { exchange } from './exchange.js';
import { PROVIDER_STATES, type ProviderState, type ProviderView, type Snapshot } from './subjects-registry-events.js';

/** Names of users and apps (docs/protocol.md "Identities"): the platform's rules. */
export const USER_NAME = /^[a-z][a-z0-9-]{0,30}$/;
export const APP_NAME = /^[a-z][a-z0-9]{0,30}$/;
/** The same rules in words, as every message, the CLI's help and the console say them. */
export const USER_NAME_RULE = 'must be 1 to 31 characters: a lowercase letter, then lowercase letters, digits or dashes';
export const APP_NAME_RULE = 'must be 1 to 31 characters: a lowercase letter, then lowercase letters or digits (no dashes)';

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
  userAdd: exchange<{ name: string }, IssuedToken>({ subject: 'pier.registry.user.add', queue: Q, request: { name: userName }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  /** {name} → {name, token}: issues one more auth token. 404 for an unknown user. */
  userToken: exchange<{ name: string }, IssuedToken>({ subject: 'pier.registry.user.token', queue: Q, request: { name: userName }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  /** {name} → {name, revoked}: revokes every auth token of the user. */
  userRevoke: exchange<{ name: string }, { name: string; revoked: number }>({ subject: 'pier.registry.user.revoke', queue: Q, request: { name: userName }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  userList: exchange<Record<string, never>, UserSummary[]>({ subject: 'pier.registry.user.list', queue: Q, request: {}, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),

  /**
   * Installs an app from manifest text (YAML) plus ProviderRegistry documents. 409 when installed.
   * `credentials` keeps an app's existing key and secret (moving it from another platform);
   * otherwise new ones are generated. 409 too when its `upload.dest` nests with another app's of
   * the same user, or is `/`, unless `sharedDest` (docs/protocol.md "Upload").
   */
  appInstall: exchange<{ user: string; manifest: string; providers: string[]; host: string; credentials?: ImportedCredentials; sharedDest?: boolean }, InstalledApp>({ subject: 'pier.registry.app.install', queue: Q, request: {
    user: userName,
    manifest: { type: 'string', max: MANIFEST_MAX },
    providers: { type: 'array', max: 32, items: { type: 'string', max: MANIFEST_MAX } },
    host: { type: 'string', min: 1, max: 253, pattern: /^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$/ },
    credentials: { type: 'object', optional: true, strict: true, props: credentialsSchema },
    sharedDest: { type: 'boolean', optional: true },
  }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  appList: exchange<{ user?: string }, AppSummary[]>({ subject: 'pier.registry.app.list', queue: Q, request: { user: { ...userName, optional: true } }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  /** Removes the app and its key at once; its providers become `suspended`. 404 when not installed. */
  appUninstall: exchange<{ user: string; app: string; purge: boolean }, { app: string; user: string; purged: boolean }>({ subject: 'pier.registry.app.uninstall', queue: Q, request: {
    user: userName,
    app: appName,
    purge: 'boolean',
  }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  /**
   * The app secret in clear, for the one role that must check proofs with it (token): the answer is
   * sealed to the token role's anchored key whoever asks, and made with the registry's.
   */
  appCredentials: exchange<{ appKey: string }, AppCredentials>({ subject: 'pier.registry.app.credentials', queue: Q, request: { appKey: { type: 'string', min: 1, max: 128 } }, seal: { replyTo: 'token', grant: 'registry' } }),
  /**
   * The app's callback key (`HMAC-SHA256(app secret, "pier callback key v1")`), for the callback
   * role that signs callbacks with it: sealed to the callback role's anchored key, made with the registry's.
   */
  appCallbackKey: exchange<{ appKey: string }, AppCallbackKey>({ subject: 'pier.registry.app.callbackkey', queue: Q, request: { appKey: { type: 'string', min: 1, max: 128 } }, seal: { replyTo: 'callback', grant: 'registry' } }),
  /**
   * Whether `secret` is the app's, compared in constant time by the registry: how the edge checks
   * `X-App-Key`/`X-App-Secret` without ever holding secrets. Answers the app's id, or 401.
   */
  appVerify: exchange<{ appKey: string; secret: string }, { app: string }>({ subject: 'pier.registry.app.verify', queue: Q, request: {
    appKey: { type: 'string', min: 1, max: 128 },
    secret: { type: 'string', max: 256 },
  }, seal: { request: 'registry', grant: 'registry' } }),

  providerList: exchange<Record<string, never>, ProviderView[]>({ subject: 'pier.registry.provider.list', queue: Q, request: {}, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),
  providerSetState: exchange<{ name: string; state: ProviderState }, ProviderView>({ subject: 'pier.registry.provider.state', queue: Q, request: {
    name: { type: 'string', min: 1, max: 253 },
    state: { type: 'enum', values: [...PROVIDER_STATES] },
  }, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),

  /** Re-seals app secrets under the current master key (part of `pier vault rotate-master-key`). */
  appReseal: exchange<Record<string, never>, { resealed: number }>({ subject: 'pier.registry.app.reseal', queue: Q, request: {}, timeoutMs: 60_000, seal: { request: 'registry', from: 'admin', reply: true, grant: 'registry' } }),

  /**
   * The whole registry as the caches see it, with its revision: every process believes what it
   * says of users, tokens, apps and grants, so it is a grant made with the registry's anchored key.
   */
  snapshot: exchange<Record<string, never>, Snapshot>({ subject: 'pier.registry.snapshot', queue: Q, request: {}, seal: { grant: 'registry' } }),
};

import type { ValidationSchema } from 'fastest-validator';
import { exchange, shared } from './exchange.js';
import type { CallGate } from './subjects-provider.js';
import { USER_NAME } from './subjects-registry.js';

/** The platform's five operations (their answers are the platform's), then those of versions, which an app has only when its manifest declares them (docs/vault.md "Versions"). */
export const PLATFORM_SECRET_OPS = ['RetrieveSecret', 'CreateSecret', 'UpdateSecret', 'DeleteSecret', 'ListSecret'] as const;
export const VERSION_SECRET_OPS = ['ListSecretVersions', 'RetrieveSecretVersion', 'RestoreSecretVersion'] as const;
export const SECRET_OPS = [...PLATFORM_SECRET_OPS, ...VERSION_SECRET_OPS] as const;
export type SecretOp = (typeof SECRET_OPS)[number];
export const SECRET_ENVS = ['test', 'dev', 'staging', 'prod'] as const;
export type SecretEnv = (typeof SECRET_ENVS)[number];
export const SECRET_NAME = /^[A-Za-z0-9_.-]{1,256}$/;
export const SECRET_VALUE_MAX_BYTES = 64 * 1024;
export const WORKSPACE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** One vault operation as the edge received it (docs/protocol.md "Vault"); the actor checks everything. */
export interface VaultRequest {
  op: string;
  workspace: string;
  /** X-Authorization: the user. */
  userToken: string;
  /** X-Access-Token: the app. */
  accessToken: string;
  /** The JSON body, parsed; validated by the actor per op. */
  body: Record<string, unknown>;
}

/**
 * The body of each operation once the vault actor has checked it against the op's schema
 * (actors/vault/handler.ts; docs/protocol.md "Vault"): fields an op does not name are ignored,
 * and `env` is `prod` when left out.
 */
export interface SecretBodies {
  RetrieveSecret: { name: string; env?: SecretEnv };
  CreateSecret: { name: string; value: string; env?: SecretEnv };
  /** `version`: check-and-set, the version the caller last read. */
  UpdateSecret: { name: string; value: string; env?: SecretEnv; version?: number };
  DeleteSecret: { name: string; env?: SecretEnv };
  ListSecret: { env?: SecretEnv };
  ListSecretVersions: { name: string; env?: SecretEnv };
  RetrieveSecretVersion: { name: string; env?: SecretEnv; version: number };
  RestoreSecretVersion: { name: string; env?: SecretEnv; version: number };
}

/** `data` of the answer, exactly as the contract shows it; `version` travels beside it (a header). */
export interface VaultAnswer {
  data: unknown;
  version?: number;
}

export interface AuditEntry {
  at: string;
  user: string | null;
  app: string | null;
  op: string;
  workspace: string;
  env: string | null;
  name: string | null;
  /** `ok`, or the error code of a refusal or failure. */
  outcome: string;
}

const vaultCaller = {
  op: { type: 'string', min: 1, max: 64 },
  workspace: { type: 'string', max: 256 },
  userToken: { type: 'string', max: 512 },
  accessToken: { type: 'string', max: 64 * 1024 },
} as const;

/** The operator's operations on versions and deleted secrets: wire format 2 (bus/envelope.ts), on `vault.versions`. */
export const OPERATOR_VAULT_VERSION_OPS = ['versions', 'deleted', 'restore', 'undelete', 'destroy'] as const;
/** What the operator does to a user's secrets from the CLI (`pier vault list|get|set|delete|purge`, and those on versions). */
export const OPERATOR_VAULT_OPS = ['list', 'get', 'set', 'delete', 'purge', ...OPERATOR_VAULT_VERSION_OPS] as const;
/** The wire format of the operations on versions: what their subject's servers speak. */
export const OPERATOR_VERSIONS_WIRE = 2;
export const isOperatorVersionOp = (op: string): op is (typeof OPERATOR_VAULT_VERSION_OPS)[number] => (OPERATOR_VAULT_VERSION_OPS as readonly string[]).includes(op);
export interface OperatorVaultRequest {
  op: (typeof OPERATOR_VAULT_OPS)[number];
  user: string;
  workspace: string;
  env?: string;
  name?: string;
  value?: string;
  /** `restore` and `destroy`: which version. */
  version?: number;
  /** `versions`: those of the deleted copy, even beside a live secret of the same name. */
  deleted?: boolean;
}

/** The wire format of `pier vault rekey`: what its subject's servers speak (actors/vault/values.ts VALUE_KEYS_WIRE). */
export const REKEY_WIRE = 3;

export interface RekeyRequest {
  /** Count only: nothing is sealed anew. */
  status?: boolean;
  /** Values sealed anew by this call at most (default 10,000): a call ends, and the next goes on. */
  limit?: number;
}

/** How many values (live secrets and kept versions) are under value keys and how many are not yet. */
export interface ValueFormats {
  secrets: { valueKeys: number; dataKeys: number };
  versions: { valueKeys: number; dataKeys: number };
}

export interface RekeyAnswer extends ValueFormats {
  /** Sealed anew by this call. */
  rekeyed: number;
  /** Values that could not be opened (a scope whose data key a purge cut short removed): left as they are. */
  unreadable: number;
  /** Whether new values are sealed under value keys now (every vault replica speaks wire format 3). */
  sealingUnderValueKeys: boolean;
}

/** Who the audit log names for what the operator did (never an app's name: no app has parentheses in its name). */
export const OPERATOR_IN_AUDIT = '(operator)';

/** What `pier vault audit` asks for: each filter narrows; `limit` is how many matches at most. */
export interface AuditQuery {
  user?: string;
  app?: string;
  op?: string;
  limit: number;
}

/** Entries searched at most for one audit query: a filter matching nothing stops here, not at the log's start. */
export const AUDIT_SCAN_MAX = 200_000;

/**
 * The matches, newest first, and how far the search went: `complete` is false when it stopped at
 * AUDIT_SCAN_MAX entries with fewer than `limit` matches (older entries were not searched).
 */
export interface AuditPage {
  entries: AuditEntry[];
  scanned: number;
  complete: boolean;
  /** When the oldest entry searched was written: where an incomplete search stopped. */
  searchedBackTo: string | null;
}

/** Whether `e` matches every filter of `q`. */
export const auditMatches = (q: AuditQuery, e: AuditEntry) => (q.user === undefined || e.user === q.user) && (q.app === undefined || e.app === q.app) && (q.op === undefined || e.op === q.op);

/** What each operator operation answers (actors/vault/operator.ts); never a value but `get`'s. */
export interface OperatorVaultAnswers {
  list: Array<{ name: string; version: number; updatedAt: string; updatedBy: string }>;
  get: { name: string; env: string; value: string; version: number };
  set: { name: string; env: string; version: number };
  delete: { deleted: string; env: string };
  purge: { purged: number };
  /**
   * Newest first, the current one included; `size` null where a version was written before sizes
   * were kept; `kept`: its value can be restored. `deleted`: when the secret is deleted, who did it and when.
   */
  versions: {
    name: string;
    env: string;
    version: number;
    versions: Array<{ version: number; at: string; by: string; size: number | null; current: boolean; kept: boolean }>;
    deleted: { at: string; by: string; destroyAt: string } | null;
  };
  deleted: Array<{ name: string; version: number; deletedAt: string; deletedBy: string; destroyAt: string; versionsKept: number }>;
  restore: { name: string; env: string; version: number; restored: number };
  undelete: { name: string; env: string; version: number };
  destroy: { name: string; env: string; destroyed: number[] };
}

/** An operator request taking `ops` (the rest of its fields are the same for every op). */
const operatorRequest = (ops: readonly string[]) => ({
  op: { type: 'enum', values: [...ops] },
  user: { type: 'string', pattern: USER_NAME },
  workspace: { type: 'string', pattern: WORKSPACE_NAME, messages: { stringPattern: 'must be 1-64 characters of [A-Za-z0-9_.-]' } },
  env: { type: 'enum', values: [...SECRET_ENVS], optional: true },
  name: { type: 'string', pattern: SECRET_NAME, optional: true, messages: { stringPattern: 'must be 1-256 characters of [A-Za-z0-9_.-]' } },
  // Characters, a bound for the message; the 64 KiB byte limit (413) is the vault's own check.
  value: { type: 'string', optional: true, max: SECRET_VALUE_MAX_BYTES * 4 },
  version: { type: 'number', integer: true, min: 1, max: Number.MAX_SAFE_INTEGER, optional: true },
  deleted: { type: 'boolean', optional: true },
});

export const vault = {
  /** Shared within one process: the edge builds each request afresh, the handler answers with new objects. */
  op: shared(exchange<VaultRequest, VaultAnswer>({ subject: 'pier.vault.op', queue: 'vault', request: { ...vaultCaller, body: { type: 'object' } }, seal: { request: 'vault', reply: true, grant: 'vault' } })),
  /** The checks of `op` up to the body (404, 400 workspace, 401, 403; refusals audited as `op`'s are), before the edge reads the body. */
  authorize: shared(exchange<Omit<VaultRequest, 'body'>, CallGate>({ subject: 'pier.vault.authorize', queue: 'vault', request: vaultCaller, seal: { request: 'vault', grant: 'vault' } })),
  /** The newest `limit` entries that match, searched back through at most AUDIT_SCAN_MAX entries. */
  audit: exchange<AuditQuery, AuditPage>({ subject: 'pier.vault.audit', queue: 'vault', request: {
    user: { type: 'string', optional: true, max: 64 },
    app: { type: 'string', optional: true, max: 64 },
    op: { type: 'string', optional: true, max: 64 },
    limit: { type: 'number', integer: true, min: 1, max: 100_000 },
  }, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
  /**
   * The operator's access to one user's workspace (admin role only), audited as `(operator)`. The
   * value travels sealed both ways; `list` answers names and versions, never values.
   */
  operator: exchange<OperatorVaultRequest, { data: OperatorVaultAnswers[OperatorVaultRequest['op']] }>({
    subject: 'pier.vault.operator',
    queue: 'vault',
    request: operatorRequest(OPERATOR_VAULT_OPS.filter((op) => !isOperatorVersionOp(op))),
    seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' },
  }),
  /**
   * The operator's operations on versions (wire format 2), on a subject of their own that only a
   * vault replica speaking format 2 serves: while 0.2 replicas run beside this release's, these go
   * to this release's alone (a 0.2 replica never receives one), and with none of this release's
   * running nothing answers (503). Nothing an announcement claims decides where they go
   * (docs/operations.md "Upgrading").
   */
  versions: exchange<OperatorVaultRequest, { data: OperatorVaultAnswers[OperatorVaultRequest['op']] }>({
    subject: 'pier.vault.versions',
    queue: 'vault',
    request: operatorRequest(OPERATOR_VAULT_VERSION_OPS),
    seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' },
  }),
  /**
   * `pier vault rekey` (wire format 3, on a subject only vault replicas of that format serve):
   * values still sealed with their scope's data key are sealed anew under value keys of their own,
   * `limit` at most per call (resumable: each call takes what is left); with `status`, only counted.
   */
  rekey: exchange<RekeyRequest, RekeyAnswer>({ subject: 'pier.vault.rekey', queue: 'vault', request: {
    status: { type: 'boolean', optional: true },
    limit: { type: 'number', integer: true, min: 1, max: 1_000_000, optional: true },
  }, timeoutMs: 120_000, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
  /** Re-wraps every data key not wrapped under the current master key. */
  rotate: exchange<Record<string, never>, { rewrapped: number }>({ subject: 'pier.vault.rotate', queue: 'vault', request: {}, timeoutMs: 60_000, seal: { request: 'vault', from: 'admin', reply: true, grant: 'vault' } }),
};

/** The vault's state on JetStream (PIER_STATE=jetstream): four key-value buckets and the audit stream. */
export const vaultState = {
  keys: 'pier-vault-keys',
  secrets: 'pier-vault-secrets',
  /** Kept versions and deleted secrets (0.3): the previous release never reads them. */
  versions: 'pier-vault-versions',
  deleted: 'pier-vault-deleted',
  /**
   * Value keys (0.3; docs/vault.md "Destroyed"), one message each, erased with the last value sealed
   * under it. 0.3.0 makes the bucket and reads it; the release after it writes it.
   */
  valueKeys: 'pier-vault-value-keys',
  auditStream: 'PIER_VAULT_AUDIT',
  auditSubject: 'pier.state.vault.audit',
} as const;

/** Where a vault replica's views must be to show a write: the stream sequence of each bucket (the last two absent from a 0.2 replica's). */
export interface WrittenMark {
  keys: number;
  secrets: number;
  versions?: number;
  deleted?: number;
  valueKeys?: number;
}

const WRITTEN_MARK: ValidationSchema = {
  keys: { type: 'number', integer: true, min: 0 },
  secrets: { type: 'number', integer: true, min: 0 },
  versions: { type: 'number', integer: true, min: 0, optional: true },
  deleted: { type: 'number', integer: true, min: 0, optional: true },
  valueKeys: { type: 'number', integer: true, min: 0, optional: true },
};

export const vaultEvents = {
  /**
   * A vault replica that made a change durable asks every vault replica (none shares a queue) to
   * take its mark in, before it answers (PIER_STATE=jetstream): each answers once it has, and reads
   * it serves from then on wait for its view to reach the mark, without asking the stream. The
   * writer waits for the answers (actors/vault/index.ts `announce`): a one-way mark could be
   * overtaken by a read of the write's client on another replica (an upgrade run saw a list 220 ms
   * stale). 0.3.0 replicas hear it as their one-way message (they ignore the reply subject) and
   * send it so; one sent so is taken in all the same, unanswered.
   */
  written: exchange<WrittenMark, { heard: boolean }>({ subject: 'pier.vault.written', request: WRITTEN_MARK, reply: { heard: 'boolean' }, timeoutMs: 1_000 }),
};

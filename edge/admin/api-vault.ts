// The admin API's answers, bodies and queries of the vault (its audit, the operator's secrets, its
// keys): types only. edge/admin/api.ts declares the routes that answer them and re-exports them, so
// callers keep one import.

export interface AuditRow {
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

/** Beside `data` of `GET /admin/v1/vault/audit` when the search stopped before `limit` matches (older entries not searched). */
export interface AuditSearched {
  entries: number;
  /** When the oldest entry searched was written. */
  backTo: string | null;
  complete: false;
}

export interface SecretRow {
  name: string;
  version: number;
  updatedAt: string;
  updatedBy: string;
}

export interface SecretValue {
  name: string;
  env: string;
  value: string;
  version: number;
}

/**
 * `pier vault versions`: who wrote each version of a secret and when, newest first; never a value.
 * `kept`: its value is kept (restorable). `deleted`: set when the secret is deleted (docs/vault.md "Versions").
 */
export interface SecretVersions {
  name: string;
  env: string;
  version: number;
  versions: Array<{ version: number; at: string; by: string; size: number | null; current: boolean; kept: boolean }>;
  deleted: { at: string; by: string; destroyAt: string } | null;
}

/** `pier vault list --deleted`: the deleted secrets of a workspace, recoverable until `destroyAt`. */
export interface DeletedSecretRow {
  name: string;
  version: number;
  deletedAt: string;
  deletedBy: string;
  destroyAt: string;
  versionsKept: number;
}

/** `pier vault restore`: the new version, whose value is version `restored`'s. */
export interface SecretRestored {
  name: string;
  env: string;
  version: number;
  restored: number;
}

/** `pier vault undelete`: the secret back, at the version it had. */
export interface SecretUndeleted {
  name: string;
  env: string;
  version: number;
}

/** `pier vault destroy`: the versions whose values are gone for good. */
export interface SecretDestroyed {
  name: string;
  env: string;
  destroyed: number[];
}

export interface SecretSet {
  name: string;
  env: string;
  version: number;
}

export interface SecretDeleted {
  deleted: string;
  env: string;
}

export interface Purged {
  purged: number;
}

/**
 * `pier vault rekey [--status]` (docs/vault.md "Destroyed"): live secrets and kept
 * versions under value keys of their own (`valueKeys`) and still under their scope's data key
 * (`dataKeys`); what this call sealed anew, what it could not open, and whether new values are
 * sealed under value keys now (every vault replica speaks wire format 3).
 */
export interface Rekeyed {
  secrets: { valueKeys: number; dataKeys: number };
  versions: { valueKeys: number; dataKeys: number };
  rekeyed: number;
  unreadable: number;
  sealingUnderValueKeys: boolean;
}

export interface Rotated {
  rewrappedDataKeys: number;
  resealedAppSecrets: number;
  /** @deprecated 0.1 name of `rewrappedDataKeys`, removed in 0.3. */
  rewrapped_data_keys: number;
  /** @deprecated 0.1 name of `resealedAppSecrets`, removed in 0.3. */
  resealed_app_secrets: number;
}

export interface VaultTarget {
  user: string;
  workspace: string;
  env?: 'test' | 'dev' | 'staging' | 'prod';
}

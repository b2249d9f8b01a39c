import { PierError } from '../../bus/errors.js';
import { SECRET_ENVS, SECRET_NAME, SECRET_OPS, SECRET_VALUE_MAX_BYTES, WORKSPACE_NAME, type AuditEntry, type CallGate, type SecretOp, type VaultAnswer, type VaultRequest } from '../../bus/subjects.js';
import type { AccessTokens } from '../../lib/crypto/access-token.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { assertValid, compile } from '../../bus/validation.js';
import type { DataKeys } from './data-keys.js';
import type { Values } from './values.js';
import { genOf, nameOf, scopeKey, secretFormatOf, secretKey, versionKey, type SecretRecord, type VaultStore, type VaultWriter } from './store.js';
import { listVersions, keepVersion, newGen, nextRecord, restore, softDelete, type VersionBounds } from './versions.js';
import { parseAppId } from '../../bus/ids.js';

export interface VaultDeps {
  store: VaultStore;
  keys: DataKeys;
  /** Seals and opens values (under their own keys, or the data key): values.ts. */
  values: Values;
  cache: RegistryCache;
  tokens: AccessTokens;
  vaultGroup: string;
  now: () => number;
  /** Records an audit entry soon (batched with others): reads and refusals. */
  audit: (entry: AuditEntry) => void;
  /** Counts a request refused before any app was authenticated: a metric, never an audit row. */
  anonymous: (op: string, outcome: string) => void;
  /** Records an audit entry in the write `w`: it commits with the change, or not at all. */
  auditInWrite: (w: VaultWriter, entry: AuditEntry) => void;
  /** What versions and deleted secrets may keep (docs/vault.md "Versions"). */
  bounds: VersionBounds;
}

const env = { type: 'enum', values: [...SECRET_ENVS], optional: true, messages: { enumValue: `must be one of ${SECRET_ENVS.join(', ')}` } } as const;
const name = { type: 'string', pattern: SECRET_NAME, messages: { stringPattern: 'must be 1-256 characters of [A-Za-z0-9_.-]' } } as const;
const value = { type: 'string' } as const;
const version = { type: 'number', integer: true, min: 1, max: Number.MAX_SAFE_INTEGER } as const;

/** Request bodies per operation; other fields are ignored. */
const bodies: Record<SecretOp, ReturnType<typeof compile>> = {
  RetrieveSecret: compile({ $$strict: false, name, env }),
  CreateSecret: compile({ $$strict: false, name, value, env }),
  UpdateSecret: compile({ $$strict: false, name, value, env, version: { type: 'number', integer: true, min: 1, optional: true } }),
  DeleteSecret: compile({ $$strict: false, name, env }),
  ListSecret: compile({ $$strict: false, env }),
  ListSecretVersions: compile({ $$strict: false, name, env }),
  RetrieveSecretVersion: compile({ $$strict: false, name, env, version }),
  RestoreSecretVersion: compile({ $$strict: false, name, env, version }),
};

interface Caller {
  user: string;
  app: string;
}

/** A caller whose checks passed, and until when its access token holds. */
interface Authorised extends Caller {
  until: number;
}

/**
 * The checks of docs/protocol.md "Vault": the app from the access token (401), still installed (401);
 * the user from X-Authorization when sent (401 if unknown or revoked), who must own the app (403),
 * else the app's owner (the platform's existing apps send only X-Access-Token); the exact op (403).
 */
function authorise(deps: VaultDeps, req: VaultRequest, op: string, partial: Partial<Caller>): Authorised {
  if (req.accessToken === '') throw new PierError('UNAUTHORIZED', 'X-Access-Token header is required');
  const claims = deps.tokens.verify(req.accessToken, deps.now());
  const { user: owner, app } = parseAppId(claims.app) ?? { user: '', app: '' };
  const installed = deps.cache.app(owner, app);
  if (!installed || installed.appKey !== claims.key) throw new PierError('UNAUTHORIZED', 'access token is no longer valid: its app was uninstalled or reinstalled');
  partial.app = app;
  let user = owner;
  if (req.userToken !== '') {
    const named = deps.cache.userForToken(req.userToken);
    if (!named) throw new PierError('UNAUTHORIZED', 'user token is invalid or revoked');
    if (named !== owner) {
      partial.user = named;
      throw new PierError('FORBIDDEN', 'the access token belongs to an app of another user');
    }
    user = named;
  }
  partial.user = user;
  const wanted = `${op}?workspace=${req.workspace}`;
  if (claims.dataType !== 'secret' || claims.group !== deps.vaultGroup || claims.version !== 'v1' || !claims.ops.includes(wanted)) {
    throw new PierError('FORBIDDEN', `${wanted} is not granted by this access token`);
  }
  return { user, app, until: claims.exp };
}

/**
 * Values opened from a record, by the record object. The decoded cache (decoded-cache.ts) answers
 * one frozen object per key for as long as the stored bytes stay the same, so a hot secret is
 * opened once per change, not once per read (AES-GCM's set-up is about a sixth of a read's CPU).
 * Each entry is checked against the key it was opened with (its value key, or its scope's data
 * key): a key that changed or went opens again, and fails if it must. Weak: an entry lives as long
 * as the cache keeps its record (1,024 at most; a record this process changes or removes is
 * dropped at once, store.ts), until the next collection after that.
 */
const opened = new WeakMap<SecretRecord, { key: Buffer; value: string }>();

function openValue(deps: VaultDeps, scope: string, key: string, record: { sealed: Uint8Array }): string {
  let opener: Buffer;
  try {
    opener = deps.values.keyFor(scope, record.sealed);
  } catch (err) {
    throw new PierError('INTERNAL', 'secret could not be decrypted', { cause: err });
  }
  const kept = opened.get(record as SecretRecord);
  if (kept && kept.key === opener) return kept.value;
  const value = deps.values.open(scope, key, record.sealed).toString('utf8');
  // Only records shared between reads (frozen by the decoded cache) are worth an entry.
  if (Object.isFrozen(record)) opened.set(record as SecretRecord, { key: opener, value });
  return value;
}

function checkValueSize(v: string): void {
  if (Buffer.byteLength(v, 'utf8') > SECRET_VALUE_MAX_BYTES) throw new PierError('PAYLOAD_TOO_LARGE', `value: must be at most ${SECRET_VALUE_MAX_BYTES} bytes`);
}

/** Runs one vault operation and audits it, whatever its outcome. */
export function vaultOp(deps: VaultDeps, req: VaultRequest): Promise<VaultAnswer> {
  return run(deps, req, false) as Promise<VaultAnswer>;
}

/**
 * The checks of `vaultOp` up to the body, for the edge to ask before it reads one: refusals are
 * audited (or counted, when anonymous) exactly as `vaultOp`'s; a pass is not (the operation will be).
 */
export function vaultGate(deps: VaultDeps, req: Omit<VaultRequest, 'body'>): Promise<CallGate> {
  return run(deps, { ...req, body: {} }, true) as Promise<CallGate>;
}

async function run(deps: VaultDeps, req: VaultRequest, gateOnly: boolean): Promise<VaultAnswer | CallGate> {
  const caller: Partial<Caller> = {};
  const body = req.body;
  const entry = (outcome: string): AuditEntry => ({
    at: new Date(deps.now()).toISOString(),
    user: caller.user ?? null,
    app: caller.app ?? null,
    op: req.op,
    workspace: req.workspace,
    env: typeof body.env === 'string' ? body.env.slice(0, 32) : 'prod',
    name: typeof body.name === 'string' ? body.name.slice(0, 256) : null,
    outcome,
  });
  try {
    if (!(SECRET_OPS as readonly string[]).includes(req.op)) throw new PierError('NOT_FOUND', `no vault operation "${req.op}" (operations: ${SECRET_OPS.join(', ')})`);
    if (!WORKSPACE_NAME.test(req.workspace)) throw new PierError('BAD_REQUEST', 'workspace: the query parameter must be 1-64 characters of [A-Za-z0-9_.-]');
    const op = req.op as SecretOp;
    const who = authorise(deps, req, op, caller);
    if (gateOnly) return { until: who.until };
    // Read what any replica has written so far: a secret created through another replica is there.
    await deps.store.sync();
    assertValid(bodies[op], body);
    const scope = scopeKey(who.user, req.workspace, (body.env as string | undefined) ?? 'prod');
    const answer = await perform(deps, op, scope, who, body, entry);
    return answer;
  } catch (err) {
    const e = err instanceof PierError ? err : new PierError('INTERNAL', 'internal error', { cause: err });
    // Only what an authenticated app did is written: anonymous traffic must not be able to grow the log.
    if (caller.app !== undefined) deps.audit(entry(e.code));
    else deps.anonymous(SECRET_OPS.includes(req.op as SecretOp) ? req.op : 'unknown', e.code);
    throw e;
  }
}

/** One operation on one scope, for a caller already authorised (an app above, the operator in operator.ts). */
export async function perform(deps: VaultDeps, op: SecretOp, scope: string, who: Caller, body: Record<string, unknown>, entry: (outcome: string) => AuditEntry): Promise<VaultAnswer> {
  const env = (body.env as string | undefined) ?? 'prod';
  const now = () => new Date(deps.now()).toISOString();
  const { store } = deps;

  if (op === 'RetrieveSecret') {
    const key = secretKey(scope, body.name as string);
    const record = store.secret(key);
    if (!record) throw new PierError('NOT_FOUND', `secret "${body.name}" not found in ${env}`);
    const value = openValue(deps, scope, key, record);
    deps.audit(entry('ok'));
    return { data: { name: body.name, value, env }, version: record.version };
  }
  if (op === 'ListSecret') {
    const data = store.listScope(scope).map(({ key, value: record }) => ({ name: nameOf(key), value: openValue(deps, scope, key, record), env }));
    deps.audit(entry('ok'));
    return { data };
  }
  if (op === 'ListSecretVersions') {
    const listed = listVersions(store, secretKey(scope, body.name as string));
    // A deleted secret is as absent to an app as to RetrieveSecret: only the operator sees it.
    if (!listed || listed.deleted) throw new PierError('NOT_FOUND', `secret "${body.name}" not found in ${env}`);
    deps.audit(entry('ok'));
    return { data: { name: body.name, env, versions: listed.versions.map(({ version, at, by, size, current, kept }) => ({ version, at, by, size, current, kept })) }, version: listed.version };
  }
  if (op === 'RetrieveSecretVersion') {
    const key = secretKey(scope, body.name as string);
    const live = store.secret(key);
    if (!live) throw new PierError('NOT_FOUND', `secret "${body.name}" not found in ${env}`);
    const wanted = body.version as number;
    const sealed = wanted === live.version ? live.sealed : store.version(versionKey(key, genOf(live), wanted))?.sealed;
    if (!sealed) throw new PierError('NOT_FOUND', `version ${wanted} of secret "${body.name}" is not kept in ${env}`);
    const value = openValue(deps, scope, key, { sealed });
    deps.audit(entry('ok'));
    return { data: { name: body.name, value, env, version: wanted }, version: live.version };
  }

  // Writes: the check, the write and its audit entry commit together, or not at all.
  const key = secretKey(scope, body.name as string);
  if (op === 'CreateSecret' || op === 'UpdateSecret') checkValueSize(body.value as string);
  // The new value's key kept on disk first (values.ts prepare), only for a write likely to land:
  // one refused on what is read now would leave a key for the sweep at every refusal.
  const current = store.secret(key);
  const likely = op === 'CreateSecret' ? !current : op === 'UpdateSecret' && current !== undefined && (body.version === undefined || body.version === current.version);
  const prepared = likely ? await deps.values.prepare(scope) : undefined;
  return store.write((w) => {
    const existing = w.secret(key);
    if (op === 'CreateSecret') {
      if (existing) throw new PierError('CONFLICT', `secret "${body.name}" already exists in ${env}`);
      const sealed = deps.values.seal(scope, key, Buffer.from(body.value as string, 'utf8'), w, undefined, prepared);
      const at = now();
      const bytes = Buffer.byteLength(body.value as string, 'utf8');
      // A new generation: a deleted secret of the same name stays apart (undelete then answers 409 naming this one).
      w.putSecret(key, { ...secretFormatOf(sealed), gen: newGen(), sealed, size: { version: 1, bytes }, version: 1, createdAt: at, createdBy: who.app, updatedAt: at, updatedBy: who.app, history: [] });
      deps.auditInWrite(w, entry('ok'));
      return { data: '', version: 1 };
    }
    if (!existing) throw new PierError('NOT_FOUND', `secret "${body.name}" not found in ${env}`);
    if (op === 'DeleteSecret') {
      // Soft: gone for every app at once, recoverable by the operator for the window (versions.ts).
      softDelete(w, deps.bounds, key, existing, who.app, now());
      deps.auditInWrite(w, entry('ok'));
      return { data: '' };
    }
    if (op === 'RestoreSecretVersion') {
      const next = restore(w, deps.bounds, key, body.version as number, who.app, now(), (sealed) => deps.values.reseal(scope, key, sealed, w));
      deps.auditInWrite(w, entry('ok'));
      return { data: '', version: next.version };
    }
    if (op !== 'UpdateSecret') throw new PierError('NOT_FOUND', `no vault operation "${op}"`);
    // UpdateSecret, optionally check-and-set on `version`.
    if (body.version !== undefined && body.version !== existing.version) {
      throw new PierError('CONFLICT', `secret "${body.name}" is at version ${existing.version}, not ${body.version}`, { data: { version: existing.version } });
    }
    const sealed = deps.values.seal(scope, key, Buffer.from(body.value as string, 'utf8'), w, undefined, prepared);
    // The value it replaces is kept as a version first (committed before the record moves past it).
    keepVersion(w, deps.bounds, key, existing, who.app);
    const next = nextRecord(existing, sealed, who.app, now());
    w.putSecret(key, next);
    deps.auditInWrite(w, entry('ok'));
    return { data: '', version: next.version };
  });
}

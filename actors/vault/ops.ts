import { PierError } from '../../bus/errors.js';
import { SECRET_VALUE_MAX_BYTES, type AuditEntry, type SecretBodies, type SecretOp, type VaultAnswer } from '../../bus/subjects.js';
import { KeyNotShown, type PreparedKey, type Values } from './values.js';
import { keyIdOf } from '../../lib/crypto/secret-box.js';
import { genOf, nameOf, secretFormatOf, secretKey, versionKey, type SecretRecord, type VaultStore, type VaultWriter } from './store.js';
import { keepVersion, newGen, nextRecord, restore, type VersionBounds } from './versions.js';
import { listVersions } from './versions-read.js';
import { softDelete } from './versions-deleted.js';

// The eight operations on one scope (docs/protocol.md "Vault"), each a function of its checked body,
// for a caller already authorised: an app (handler.ts) or the operator (operator.ts).

/** What the operations need (a part of VaultDeps, handler.ts). */
export interface OpDeps {
  store: VaultStore;
  /** Seals and opens values (under their own keys, or the data key): values.ts. */
  values: Values;
  now: () => number;
  /** Records an audit entry soon (batched with others): reads and refusals. */
  audit: (entry: AuditEntry) => void;
  /** Records an audit entry in the write `w`: it commits with the change, or not at all. */
  auditInWrite: (w: VaultWriter, entry: AuditEntry) => void;
  /** What versions and deleted secrets may keep (docs/vault.md "Versions"). */
  bounds: VersionBounds;
}

export interface Caller {
  user: string;
  app: string;
}

/** One operation's call: on which scope, for whom, and the audit entry its success writes. */
interface OpCall {
  deps: OpDeps;
  scope: string;
  who: Caller;
  /** The body's env, `prod` when left out. */
  env: string;
  entry: (outcome: string) => AuditEntry;
}

type OpFunction<O extends SecretOp> = (c: OpCall, body: SecretBodies[O]) => VaultAnswer | Promise<VaultAnswer>;
type OpTable = { readonly [O in SecretOp]: OpFunction<O> };

const now = (deps: OpDeps) => new Date(deps.now()).toISOString();

/**
 * Values opened from a record, by the record object. The decoded cache (decoded-cache.ts) answers
 * one frozen object per key for as long as the stored bytes stay the same, so a hot secret is
 * opened once per change, not once per read (AES-GCM's set-up is about a sixth of a read's CPU).
 * Each entry is checked against the key it was opened with (its value key, or its scope's data
 * key): a key that changed or went opens again, and fails if it must. Weak: an entry lives as long
 * as the cache keeps its record (1,024 at most; a record this process changes or removes is
 * dropped at once, store-lmdb-write.ts), until the next collection after that.
 */
const opened = new WeakMap<SecretRecord, { key: Buffer; id: string | undefined; value: string }>();

function openValue(deps: OpDeps, scope: string, key: string, record: { sealed: Uint8Array }): string {
  const kept = opened.get(record as SecretRecord);
  // The id of the value's key, as read from the record when it was opened (the record is frozen).
  const id = kept ? kept.id : keyIdOf(record.sealed);
  let opener: Buffer;
  try {
    opener = deps.values.keyFor(scope, record.sealed, undefined, id);
  } catch (err) {
    throw new PierError('INTERNAL', 'secret could not be decrypted', { cause: err });
  }
  if (kept && kept.key === opener) return kept.value;
  const value = deps.values.open(scope, key, record.sealed).toString('utf8');
  // Only records shared between reads (frozen by the decoded cache) are worth an entry.
  if (Object.isFrozen(record)) opened.set(record as SecretRecord, { key: opener, id, value });
  return value;
}

function checkValueSize(v: string): void {
  if (Buffer.byteLength(v, 'utf8') > SECRET_VALUE_MAX_BYTES) throw new PierError('PAYLOAD_TOO_LARGE', `value: must be at most ${SECRET_VALUE_MAX_BYTES} bytes`);
}

const notFound = (c: OpCall, name: string) => new PierError('NOT_FOUND', `secret "${name}" not found in ${c.env}`);

function retrieveSecret(c: OpCall, body: SecretBodies['RetrieveSecret']): VaultAnswer {
  const key = secretKey(c.scope, body.name);
  const record = c.deps.store.secret(key);
  if (!record) throw notFound(c, body.name);
  const value = openValue(c.deps, c.scope, key, record);
  c.deps.audit(c.entry('ok'));
  return { data: { name: body.name, value, env: c.env }, version: record.version };
}

function listSecret(c: OpCall): VaultAnswer {
  const data = c.deps.store.listScope(c.scope).map(({ key, value: record }) => ({ name: nameOf(key), value: openValue(c.deps, c.scope, key, record), env: c.env }));
  c.deps.audit(c.entry('ok'));
  return { data };
}

function listSecretVersions(c: OpCall, body: SecretBodies['ListSecretVersions']): VaultAnswer {
  const listed = listVersions(c.deps.store, secretKey(c.scope, body.name));
  // A deleted secret is as absent to an app as to RetrieveSecret: only the operator sees it.
  if (!listed || listed.deleted) throw notFound(c, body.name);
  c.deps.audit(c.entry('ok'));
  return { data: { name: body.name, env: c.env, versions: listed.versions.map(({ version, at, by, size, current, kept }) => ({ version, at, by, size, current, kept })) }, version: listed.version };
}

function retrieveSecretVersion(c: OpCall, body: SecretBodies['RetrieveSecretVersion']): VaultAnswer {
  const { store } = c.deps;
  const key = secretKey(c.scope, body.name);
  const live = store.secret(key);
  if (!live) throw notFound(c, body.name);
  const wanted = body.version;
  const sealed = wanted === live.version ? live.sealed : store.version(versionKey(key, genOf(live), wanted))?.sealed;
  if (!sealed) throw new PierError('NOT_FOUND', `version ${wanted} of secret "${body.name}" is not kept in ${c.env}`);
  const value = openValue(c.deps, c.scope, key, { sealed });
  c.deps.audit(c.entry('ok'));
  return { data: { name: body.name, value, env: c.env, version: wanted }, version: live.version };
}

/**
 * A write: the check, the write and its audit entry commit together, or not at all. `fn` reads the
 * secret as the write sees it (`existing`).
 */
async function writing(c: OpCall, key: string, likely: (current: SecretRecord | undefined) => boolean, fn: (w: VaultWriter, existing: SecretRecord | undefined, prepared: PreparedKey | undefined) => VaultAnswer): Promise<VaultAnswer> {
  // The new value's key kept on disk first (values.ts prepare), only for a write likely to land:
  // one refused on what is read now would leave a key for the sweep at every refusal.
  const prepared = likely(c.deps.store.secret(key)) ? await c.deps.values.prepare(c.scope) : undefined;
  return c.deps.store.write((w) => fn(w, w.secret(key), prepared));
}

/** Neither a delete nor a restore seals a new value under a prepared key. */
const sealsNothingNew = () => false;

function createSecret(c: OpCall, body: SecretBodies['CreateSecret']): Promise<VaultAnswer> {
  const key = secretKey(c.scope, body.name);
  checkValueSize(body.value);
  return writing(c, key, (current) => !current, (w, existing, prepared) => {
    if (existing) throw new PierError('CONFLICT', `secret "${body.name}" already exists in ${c.env}`);
    const sealed = c.deps.values.seal(c.scope, key, Buffer.from(body.value, 'utf8'), w, undefined, prepared);
    const at = now(c.deps);
    const bytes = Buffer.byteLength(body.value, 'utf8');
    // A new generation: a deleted secret of the same name stays apart (undelete then answers 409 naming this one).
    w.putSecret(key, { ...secretFormatOf(sealed), gen: newGen(), sealed, size: { version: 1, bytes }, version: 1, createdAt: at, createdBy: c.who.app, updatedAt: at, updatedBy: c.who.app, history: [] });
    c.deps.auditInWrite(w, c.entry('ok'));
    return { data: '', version: 1 };
  });
}

/** UpdateSecret, optionally check-and-set on `version`. */
function updateSecret(c: OpCall, body: SecretBodies['UpdateSecret']): Promise<VaultAnswer> {
  const key = secretKey(c.scope, body.name);
  checkValueSize(body.value);
  const likely = (current: SecretRecord | undefined) => current !== undefined && (body.version === undefined || body.version === current.version);
  return writing(c, key, likely, (w, existing, prepared) => {
    if (!existing) throw notFound(c, body.name);
    if (body.version !== undefined && body.version !== existing.version) {
      throw new PierError('CONFLICT', `secret "${body.name}" is at version ${existing.version}, not ${body.version}`, { data: { version: existing.version } });
    }
    const sealed = c.deps.values.seal(c.scope, key, Buffer.from(body.value, 'utf8'), w, undefined, prepared);
    // The value it replaces is kept as a version first (committed before the record moves past it).
    keepVersion(w, c.deps.bounds, key, existing, c.who.app);
    const next = nextRecord(existing, sealed, c.who.app, now(c.deps));
    w.putSecret(key, next);
    c.deps.auditInWrite(w, c.entry('ok'));
    return { data: '', version: next.version };
  });
}

function deleteSecret(c: OpCall, body: SecretBodies['DeleteSecret']): Promise<VaultAnswer> {
  const key = secretKey(c.scope, body.name);
  return writing(c, key, sealsNothingNew, (w, existing) => {
    if (!existing) throw notFound(c, body.name);
    // Soft: gone for every app at once, recoverable by the operator for the window (versions-deleted.ts).
    softDelete(w, c.deps.bounds, key, existing, c.who.app, now(c.deps));
    c.deps.auditInWrite(w, c.entry('ok'));
    return { data: '' };
  });
}

function restoreSecretVersion(c: OpCall, body: SecretBodies['RestoreSecretVersion']): Promise<VaultAnswer> {
  const key = secretKey(c.scope, body.name);
  return writing(c, key, sealsNothingNew, (w, existing) => {
    if (!existing) throw notFound(c, body.name);
    const next = restore(w, c.deps.bounds, key, body.version, c.who.app, now(c.deps), (sealed) => c.deps.values.reseal(c.scope, key, sealed, w));
    c.deps.auditInWrite(w, c.entry('ok'));
    return { data: '', version: next.version };
  });
}

/** Each operation's function, by its name. */
export const SECRET_OP_FUNCTIONS = {
  RetrieveSecret: retrieveSecret,
  CreateSecret: createSecret,
  UpdateSecret: updateSecret,
  DeleteSecret: deleteSecret,
  ListSecret: listSecret,
  ListSecretVersions: listSecretVersions,
  RetrieveSecretVersion: retrieveSecretVersion,
  RestoreSecretVersion: restoreSecretVersion,
} as const satisfies OpTable;

/** The operations that only read: one can be made again. */
const READS: ReadonlySet<SecretOp> = new Set(['RetrieveSecret', 'ListSecret', 'RetrieveSecretVersion', 'ListSecretVersions']);

/**
 * One operation on one scope, for a caller already authorised (an app in handler.ts, the operator
 * in operator.ts). A read that meets a value whose key this replica does not show catches up with
 * the streams once and reads again (values.ts KeyNotShown): on JetStream each bucket's view follows
 * its own stream, and an upgrade run saw a list answer 500 for a record followed before its key.
 * A read on a store with nothing to catch up with (LMDB) is answered as it is, or throws, with no
 * promise made: every vault read comes through here.
 */
export function perform<O extends SecretOp>(deps: OpDeps, op: O, scope: string, who: Caller, body: SecretBodies[O], entry: (outcome: string) => AuditEntry): VaultAnswer | Promise<VaultAnswer> {
  const fn: OpFunction<O> = (SECRET_OP_FUNCTIONS as OpTable)[op];
  const run = () => fn({ deps, scope, who, env: body.env ?? 'prod', entry }, body);
  if (!READS.has(op) || !deps.store.syncWithStreams) return run();
  return catchingUp(deps.store.syncWithStreams.bind(deps.store), run);
}

/** `run` (a read), once more after catching up with the streams when its value's key was not shown. */
async function catchingUp(syncWithStreams: () => Promise<void>, run: () => VaultAnswer | Promise<VaultAnswer>): Promise<VaultAnswer> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof PierError && err.cause instanceof KeyNotShown)) throw err;
    await syncWithStreams();
    return run();
  }
}

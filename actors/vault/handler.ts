import { PierError } from '../../bus/errors.js';
import { SECRET_ENVS, SECRET_NAME, SECRET_OPS, WORKSPACE_NAME, type AuditEntry, type CallGate, type SecretBodies, type SecretOp, type VaultAnswer, type VaultRequest } from '../../bus/subjects.js';
import type { AccessTokens } from '../../lib/crypto/access-token.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { assertValid, compile } from '../../bus/validation.js';
import type { DataKeys } from './data-keys.js';
import { scopeKey } from './store.js';
import { perform, type Caller, type OpDeps } from './ops.js';
import { parseAppId } from '../../bus/ids.js';

export interface VaultDeps extends OpDeps {
  keys: DataKeys;
  cache: RegistryCache;
  tokens: AccessTokens;
  vaultGroup: string;
  /** Counts a request refused before any app was authenticated: a metric, never an audit row. */
  anonymous: (op: string, outcome: string) => void;
}

const env = { type: 'enum', values: [...SECRET_ENVS], optional: true, messages: { enumValue: `must be one of ${SECRET_ENVS.join(', ')}` } } as const;
const name = { type: 'string', pattern: SECRET_NAME, messages: { stringPattern: 'must be 1-256 characters of [A-Za-z0-9_.-]' } } as const;
const value = { type: 'string' } as const;
const version = { type: 'number', integer: true, min: 1, max: Number.MAX_SAFE_INTEGER } as const;

/** Request bodies per operation (bus/subjects-vault.ts SecretBodies); other fields are ignored. */
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

/** `body` checked against `op`'s schema (400 naming the field otherwise): from here on, the op's type. */
function checkedBody<O extends SecretOp>(op: O, body: Record<string, unknown>): SecretBodies[O] {
  assertValid(bodies[op], body);
  return body as SecretBodies[O];
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

/** The last time an audit entry was made for, and its ISO text: reads come many a millisecond. */
let isoMs = Number.NaN;
let iso = '';

/** `new Date(ms).toISOString()`, made once per millisecond. */
function isoTime(ms: number): string {
  if (ms !== isoMs) {
    iso = new Date(ms).toISOString();
    isoMs = ms;
  }
  return iso;
}

async function run(deps: VaultDeps, req: VaultRequest, gateOnly: boolean): Promise<VaultAnswer | CallGate> {
  const caller: Partial<Caller> = {};
  const body = req.body;
  const entry = (outcome: string): AuditEntry => ({
    at: isoTime(deps.now()),
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
    // (Nothing to wait for on LMDB: no turn spent on it.)
    const synced = deps.store.sync();
    if (synced) await synced;
    const checked = checkedBody(op, body);
    const scope = scopeKey(who.user, req.workspace, checked.env ?? 'prod');
    const answer = perform(deps, op, scope, who, checked, entry);
    return answer instanceof Promise ? await answer : answer;
  } catch (err) {
    const e = err instanceof PierError ? err : new PierError('INTERNAL', 'internal error', { cause: err });
    // Only what an authenticated app did is written: anonymous traffic must not be able to grow the log.
    if (caller.app !== undefined) deps.audit(entry(e.code));
    else deps.anonymous(SECRET_OPS.includes(req.op as SecretOp) ? req.op : 'unknown', e.code);
    throw e;
  }
}

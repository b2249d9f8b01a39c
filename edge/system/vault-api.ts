import { ask } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { vault } from '../../bus/subjects.js';
import { GATE_TIMEOUT_MS, passGate, type PassedGates } from '../identity/call-gate.js';
import { errorReply } from '../http/envelope.js';
import { queryParam, type HttpReply, type HttpRequestData, type RequestHead } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';
import { userTokenOf } from '../identity/user-token.js';

// The vault at the edge (docs/protocol.md "Vault"). It shares its URL pattern with provider calls,
// `/system-server/v1alpha1/<dataType>/<group>/<version>/<op>`, because to apps it is one more v1
// provider: `secret` / `secret.<vault>` / `v1`. Unlike a provider it takes POST only, names the
// user as well as the app, and is served by the vault actor, not the provider actor.

export interface VaultApiDeps {
  bus: Bus;
  /** The configured vault: calls go to `secret.<vaultName>`. */
  vaultName: string;
  gates: PassedGates;
}

/** Whether a system call is the vault's: its data type, once the path is decoded. */
export function isVaultCall(req: RequestHead): boolean {
  return req.params.dataType === 'secret';
}

/** `secret.<vault>`, made once per vault name (every call compares its group with it). */
let groupOf = { vaultName: '', group: 'secret.' };
const ourGroup = (vaultName: string) => (groupOf.vaultName === vaultName ? groupOf : (groupOf = { vaultName, group: `secret.${vaultName}` })).group;

/** Whether the call names this edge's vault and its one version. */
const isOurVault = (deps: VaultApiDeps, req: RequestHead) => req.params.group === ourGroup(deps.vaultName) && req.params.version === 'v1';

/** Which vault and method: 404 for another vault or version, 405 (with `Allow`) for a method other than POST. */
function vaultRoute(deps: VaultApiDeps, req: RequestHead): HttpReply | null {
  const { group, version } = req.params;
  if (!isOurVault(deps, req)) throw new PierError('NOT_FOUND', `no vault at secret/${group}/${version}`);
  if (req.method !== 'post') return { ...errorReply(new PierError('METHOD_NOT_ALLOWED', 'vault operations take POST')), headers: { allow: 'POST' } };
  return null;
}

/** What a pass of a vault call's gate is remembered under, beside its access token: the user's token, the op and the workspace. */
function gateWhat(req: RequestHead): string {
  return `vault\0${userTokenOf(req.headers)}\0${req.params.op}\0${queryParam(req, 'workspace') ?? ''}`;
}

/** The vault's checks that need no body (vault, method, app and user, op granted), before the body is read. */
export async function vaultCallGate(deps: VaultApiDeps, req: RequestHead): Promise<HttpReply | null> {
  const refused = vaultRoute(deps, req);
  if (refused) return refused;
  const { op } = req.params;
  const accessToken = req.headers['x-access-token'] ?? '';
  const userToken = userTokenOf(req.headers);
  const workspace = queryParam(req, 'workspace') ?? '';
  return passGate(deps.gates, accessToken, gateWhat(req), () => ask(deps.bus, vault.authorize, { op, workspace, userToken, accessToken }, { timeoutMs: GATE_TIMEOUT_MS }));
}

/**
 * Whether the gate would let this call through at once, from a pass it remembers (`Route.gatePassed`):
 * asked synchronously, so an app reading often makes no promise for its gate. False whenever the
 * gate has anything to say (another vault or version, not POST, nothing remembered): it then runs.
 */
export function vaultCallPassed(deps: VaultApiDeps, req: RequestHead): boolean {
  return isOurVault(deps, req) && req.method === 'post' && deps.gates.passedFor(req.headers['x-access-token'] ?? '', gateWhat(req), Date.now());
}

/**
 * `/system-server/v1alpha1/secret/secret.<vault>/v1/<Op>?workspace=<ws>`: the vault, a built-in v1
 * provider. POST only. Like every v1 provider answer, a success is wrapped: the outer envelope is
 * the provider call's (`code: 0`), the vault's own (`code: 200`, `message: ""`) sits in its `data`,
 * where the platform's clients read it (`.data.data`). Failures are not wrapped.
 */
export async function vaultCall(deps: VaultApiDeps, req: HttpRequestData): Promise<HttpReply> {
  const refused = vaultRoute(deps, req);
  if (refused) return refused;
  const { op } = req.params;
  const body = req.body.byteLength === 0 ? {} : parseJsonBody(req);
  const answer = await ask(deps.bus, vault.op, {
    op,
    workspace: queryParam(req, 'workspace') ?? '',
    userToken: userTokenOf(req.headers),
    accessToken: req.headers['x-access-token'] ?? '',
    body,
  });
  return {
    status: 200,
    json: { code: 0, message: 'success', data: { code: 200, message: '', data: answer.data } },
    headers: answer.version === undefined ? {} : { 'x-pier-secret-version': String(answer.version) },
  };
}

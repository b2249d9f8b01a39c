import type { Bus } from '../bus/bus.js';
import { PierError } from '../bus/errors.js';
import { call } from '../bus/rpc.js';
import { bufferSource, INLINE_BYTES, pullStream, serveStream } from '../bus/stream.js';
import { accessRequestSchema, provider, token, vault, type AccessRequest } from '../bus/subjects.js';
import { userTokenOf } from './user-token.js';
import { assertValid, compile } from '../bus/validation.js';
import type { PassedGates } from './call-gate.js';
import { errorReply, ok, parseJsonBody, type HttpReply, type HttpRequestData, type RequestHead } from './http.js';

export interface SystemDeps {
  bus: Bus;
  providerTimeoutMs: number;
  vaultName: string;
  gates: PassedGates;
}

const checkAccess = compile(accessRequestSchema);

/** `POST /permission/v1alpha1/access`: validated here, verified and issued by the token actor. */
export async function accessToken(deps: SystemDeps, req: HttpRequestData): Promise<HttpReply> {
  const body = parseJsonBody(req);
  assertValid(checkAccess, body);
  const issued = await call(deps.bus, token.issue, { ...(body as unknown as AccessRequest), client: req.remoteAddress });
  return ok(issued);
}

/**
 * Before the body of a provider or vault call is read (CONTRACT.md section 4): the checks that need
 * no body, asked of the actor that serves the call. A refusal is answered at once and the body is
 * discarded unread, so a caller without a valid token cannot make the edge buffer 8 MiB.
 */
/** How long one ask of the body-less checks may take before it is asked again, once. */
const GATE_TIMEOUT_MS = 2_000;

export async function systemCallGate(deps: SystemDeps, req: RequestHead): Promise<HttpReply | null> {
  const accessToken = req.headers['x-access-token'] ?? '';
  const { dataType, group, version, op } = req.params;
  if (dataType === 'secret') {
    const refused = vaultRoute(deps, req);
    if (refused) return refused;
  } else if (accessToken === '') {
    throw new PierError('UNAUTHORIZED', 'X-Access-Token header is required');
  }
  const workspace = req.query.get('workspace') ?? '';
  const userToken = dataType === 'secret' ? userTokenOf(req.headers) : '';
  const key = [accessToken, userToken, dataType, group, version, op, workspace].join('\0');
  const now = Date.now();
  if (deps.gates.passed(key, now)) return null;
  // A pure check, so safe to ask twice: a request that met a replica dying at that moment (its
  // subscription not yet gone) is asked again of the others instead of failing the call.
  const ask = () =>
    dataType === 'secret'
      ? call(deps.bus, vault.authorize, { op, workspace, userToken, accessToken }, GATE_TIMEOUT_MS)
      : call(deps.bus, provider.authorize, { dataType, group, version, op, accessToken }, GATE_TIMEOUT_MS);
  const gate = await ask().catch((err: unknown) => {
    if (err instanceof PierError && (err.code === 'TIMEOUT' || err.code === 'UNAVAILABLE')) return ask();
    throw err;
  });
  deps.gates.remember(key, gate.until, now);
  return null;
}

/**
 * `/system-server/v1alpha1/<dataType>/<group>/<version>/<op>`: handed to the provider actor. A
 * large body is served to it piece by piece; a large answer is pulled piece by piece as the client
 * reads it.
 */
export async function providerCall(deps: SystemDeps, req: HttpRequestData): Promise<HttpReply> {
  if (req.params.dataType === 'secret') return vaultCall(deps, req);
  const accessToken = req.headers['x-access-token'] ?? '';
  if (accessToken === '') throw new PierError('UNAUTHORIZED', 'X-Access-Token header is required');
  const large = req.body.byteLength > INLINE_BYTES;
  const served = large ? serveStream(deps.bus, 'edge', bufferSource(req.body), deps.providerTimeoutMs) : null;
  try {
    const answer = await call(
      deps.bus,
      provider.call,
      {
        dataType: req.params.dataType,
        group: req.params.group,
        version: req.params.version,
        op: req.params.op,
        method: req.method.toUpperCase(),
        query: req.rawQuery,
        headers: req.headers,
        accessToken,
        client: req.remoteAddress,
        body: large ? null : req.body,
        bodyStream: served?.subject ?? null,
      },
      // The actor's own deadline (504 with the provider's name) must fire before the bus's.
      deps.providerTimeoutMs + 2_000,
    );
    if (answer.bodyStream) return { status: answer.status, headers: answer.headers, stream: pullStream(deps.bus, answer.bodyStream, deps.providerTimeoutMs) };
    return { status: answer.status, headers: answer.headers, body: answer.body ?? new Uint8Array(0) };
  } catch (err) {
    served?.close();
    throw err;
  }
}

/** Which vault and method: 404 for another vault or version, 405 (with `Allow`) for a method other than POST. */
function vaultRoute(deps: SystemDeps, req: RequestHead): HttpReply | null {
  const { group, version } = req.params;
  if (group !== `secret.${deps.vaultName}` || version !== 'v1') throw new PierError('NOT_FOUND', `no vault at secret/${group}/${version}`);
  if (req.method !== 'post') return { ...errorReply(new PierError('METHOD_NOT_ALLOWED', 'vault operations take POST')), headers: { allow: 'POST' } };
  return null;
}

/**
 * `/system-server/v1alpha1/secret/secret.<vault>/v1/<Op>?workspace=<ws>`: the vault, a built-in v1
 * provider. POST only. Like every v1 provider answer, a success is wrapped: the outer envelope is
 * the provider call's (`code: 0`), the vault's own (`code: 200`, `message: ""`) sits in its `data`,
 * where the platform's clients read it (`.data.data`). Failures are not wrapped.
 */
async function vaultCall(deps: SystemDeps, req: HttpRequestData): Promise<HttpReply> {
  const refused = vaultRoute(deps, req);
  if (refused) return refused;
  const { op } = req.params;
  const body = req.body.byteLength === 0 ? {} : parseJsonBody(req);
  const answer = await call(deps.bus, vault.op, {
    op,
    workspace: req.query.get('workspace') ?? '',
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

import { ask } from '../../bus/verbs.js';
import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { bufferSource, INLINE_BYTES, offerBytes, takeBytes } from '../../bus/byte-stream.js';
import { accessRequestSchema, provider, token, type AccessRequest } from '../../bus/subjects.js';
import { assertValid, compile } from '../../bus/validation.js';
import { GATE_TIMEOUT_MS, passGate, type PassedGates } from '../identity/call-gate.js';
import { ok } from '../http/envelope.js';
import type { HttpReply, HttpRequestData, RequestHead } from '../http/http.js';
import { parseJsonBody } from '../http/json-body.js';

export interface SystemDeps {
  bus: Bus;
  providerTimeoutMs: number;
  gates: PassedGates;
}

const checkAccess = compile(accessRequestSchema);

/** `POST /permission/v1alpha1/access`: validated here, verified and issued by the token actor. */
export async function accessToken(deps: SystemDeps, req: HttpRequestData): Promise<HttpReply> {
  const body = parseJsonBody(req);
  assertValid(checkAccess, body);
  const issued = await ask(deps.bus, token.issue, { ...(body as unknown as AccessRequest), client: req.remoteAddress });
  return ok(issued);
}

function accessTokenOf(req: RequestHead): string {
  const accessToken = req.headers['x-access-token'] ?? '';
  if (accessToken === '') throw new PierError('UNAUTHORIZED', 'X-Access-Token header is required');
  return accessToken;
}

/** What a pass of a provider call's gate is remembered under, beside its token: what it is used for. */
function gateWhat(req: RequestHead): string {
  const { dataType, group, version, op } = req.params;
  return `provider\0${dataType}\0${group}\0${version}\0${op}`;
}

/** A provider call's checks that need no body (token, op granted, provider active), before the body is read. */
export async function providerCallGate(deps: SystemDeps, req: RequestHead): Promise<HttpReply | null> {
  const accessToken = accessTokenOf(req);
  const { dataType, group, version, op } = req.params;
  return passGate(deps.gates, accessToken, gateWhat(req), () => ask(deps.bus, provider.authorize, { dataType, group, version, op, accessToken }, { timeoutMs: GATE_TIMEOUT_MS }));
}

/**
 * Whether the gate would let this call through at once, from a pass it remembers (`Route.gatePassed`):
 * asked synchronously, so the usual call of an app that calls often makes no promise for its gate.
 * False whenever the gate has anything to say (no token, nothing remembered): it then runs.
 */
export function providerCallPassed(deps: SystemDeps, req: RequestHead): boolean {
  const accessToken = req.headers['x-access-token'] ?? '';
  return accessToken !== '' && deps.gates.passedFor(accessToken, gateWhat(req), Date.now());
}

/**
 * `/system-server/v1alpha1/<dataType>/<group>/<version>/<op>`: handed to the provider actor. A
 * large body is offered to it as a byte stream (bus/byte-stream.ts); a large answer is taken piece by
 * piece as the client reads it.
 */
export async function providerCall(deps: SystemDeps, req: HttpRequestData): Promise<HttpReply> {
  const accessToken = accessTokenOf(req);
  const large = req.body.byteLength > INLINE_BYTES;
  const served = large ? offerBytes(deps.bus, 'edge', 'provider', bufferSource(req.body), deps.providerTimeoutMs) : null;
  try {
    const answer = await ask(deps.bus, provider.call, {
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
      { timeoutMs: deps.providerTimeoutMs + 2_000 },
    );
    if (answer.bodyStream) return { status: answer.status, headers: answer.headers, stream: takeBytes(deps.bus, 'edge', answer.bodyStream, deps.providerTimeoutMs) };
    return { status: answer.status, headers: answer.headers, body: answer.body ?? new Uint8Array(0) };
  } catch (err) {
    served?.close();
    throw err;
  }
}

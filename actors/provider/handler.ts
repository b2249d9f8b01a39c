import type { Bus } from '../../bus/bus.js';
import { PierError } from '../../bus/errors.js';
import { bufferSource, INLINE_BYTES, offerBytes, takeBytes } from '../../bus/byte-stream.js';
import type { ProviderAnswer, ProviderAuthorize, ProviderCall, ProviderView } from '../../bus/subjects.js';
import type { AccessClaims, AccessTokens } from '../../lib/crypto/access-token.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { requestHeaders, responseHeaders } from './headers.js';
import type { Upstream } from './upstream.js';
import { parseAppId } from '../../bus/ids.js';

export interface ProviderDeps {
  bus: Bus;
  cache: RegistryCache;
  tokens: AccessTokens;
  now: () => number;
  upstream: Upstream;
  timeoutMs: number;
  bodyBytes: number;
  /** Hears each upstream call: provider name, HTTP status given to the caller, seconds to the provider's headers. */
  observe: (provider: string, status: number, seconds: number) => void;
}

/** The checks of docs/protocol.md "Provider calls", in order: token (401), op (403), provider (404). */
export function authorise(deps: ProviderDeps, req: ProviderAuthorize): { claims: AccessClaims; user: string; app: string; target: ProviderView } {
  if (req.accessToken === '') throw new PierError('UNAUTHORIZED', 'X-Access-Token header is required');
  const claims = deps.tokens.verify(req.accessToken, deps.now());
  const { user, app } = parseAppId(claims.app) ?? { user: '', app: '' };
  const installed = deps.cache.app(user, app);
  if (!installed || installed.appKey !== claims.key) throw new PierError('UNAUTHORIZED', 'access token is no longer valid: its app was uninstalled or reinstalled');
  if (claims.dataType !== req.dataType || claims.group !== req.group || claims.version !== req.version || !claims.ops.includes(req.op)) {
    throw new PierError('FORBIDDEN', `op "${req.op}" of ${req.dataType}/${req.group}/${req.version} is not granted by this access token`);
  }
  const target = deps.cache.activeProvider(user, req.dataType, req.group, req.version);
  if (!target || !target.opApis.some((o) => o.name === req.op)) {
    throw new PierError('NOT_FOUND', `no active provider serves ${req.dataType}/${req.group}/${req.version} with op "${req.op}"`);
  }
  return { claims, user, app, target };
}

function tooLarge(what: string, limit: number): PierError {
  return new PierError('PAYLOAD_TOO_LARGE', `${what} is larger than ${limit} bytes`);
}

/** The caller's body as a source, whether it came inline or offered as a stream (counted against the limit). */
async function* callerBody(deps: ProviderDeps, req: ProviderCall): AsyncGenerator<Uint8Array> {
  if (req.body) {
    yield req.body;
    return;
  }
  let size = 0;
  for await (const piece of takeBytes(deps.bus, 'provider', req.bodyStream!, deps.timeoutMs)) {
    size += piece.byteLength;
    if (size > deps.bodyBytes) throw tooLarge('request body', deps.bodyBytes);
    yield piece;
  }
}

async function readAll(source: AsyncIterable<Uint8Array>, limit: number, what: string): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const p of source) {
    size += p.byteLength;
    if (size > limit) throw tooLarge(what, limit);
    parts.push(p);
  }
  return Buffer.concat(parts);
}

/** An answer whose body is in memory: inline when small, else offered as a stream. */
function answerWith(deps: ProviderDeps, status: number, headers: Record<string, string>, body: Buffer): ProviderAnswer {
  if (body.byteLength <= INLINE_BYTES) return { status, headers, body, bodyStream: null };
  return { status, headers, body: null, bodyStream: offerBytes(deps.bus, 'provider', 'edge', bufferSource(body), deps.timeoutMs).subject };
}

/** Where an op goes: the provider's origin and the op's path (kept apart: undici then parses no URL per call). */
function targetUrl(target: ProviderView, op: string, query: string): { origin: string; path: string } {
  const uri = target.opApis.find((o) => o.name === op)!.uri;
  return { origin: `http://${target.endpoint}`, path: `${uri}${query ? `${uri.includes('?') ? '&' : '?'}${query}` : ''}` };
}

/** v2: the request goes through as it is, and so does the answer (streamed when large). */
async function forwardV2(deps: ProviderDeps, req: ProviderCall, ctx: ReturnType<typeof authorise>, url: { origin: string; path: string }): Promise<ProviderAnswer> {
  const hasBody = req.body !== null ? req.body.byteLength > 0 : req.bodyStream !== null;
  const res = await deps.upstream.send(ctx.target.name, url, {
    method: req.method,
    headers: requestHeaders(req.headers, { app: ctx.app, user: ctx.user, address: req.client }),
    // An inline body goes as a buffer (with its length); only a streamed one goes chunked.
    body: !hasBody ? null : req.body !== null ? req.body : callerBody(deps, req),
    timeoutMs: deps.timeoutMs,
    holdBytes: INLINE_BYTES,
    maxBytes: deps.bodyBytes,
  });
  const headers = responseHeaders(res.headers);
  if (res.body !== null) return { status: res.status, headers, body: res.body, bodyStream: null };
  // Past the first piece the status is sent: a failure from here on (a cut, a silence, the size cap)
  // reaches the caller as a cut answer.
  const stream = res.stream!;
  const served = offerBytes(deps.bus, 'provider', 'edge', stream, deps.timeoutMs);
  void served.finished.then(() => stream.destroy());
  return { status: res.status, headers, body: null, bodyStream: served.subject };
}

/** v1: Pier wraps the caller's JSON in the v1 envelope, and the provider's JSON in Pier's. */
async function callV1(deps: ProviderDeps, req: ProviderCall, ctx: ReturnType<typeof authorise>, url: { origin: string; path: string }): Promise<ProviderAnswer> {
  const raw = await readAll(callerBody(deps, req), deps.bodyBytes, 'request body');
  let data: unknown = null;
  if (raw.byteLength > 0) {
    try {
      data = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new PierError('BAD_REQUEST', 'body: is not valid JSON (a v1 provider takes JSON)');
    }
  }
  const envelope = { op: req.op, datatype: req.dataType, version: req.version, group: req.group, appkey: ctx.claims.key, data };
  const res = await deps.upstream.send(ctx.target.name, url, {
    method: 'POST',
    headers: { ...requestHeaders(req.headers, { ...ctx, address: req.client }), 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(envelope)),
    timeoutMs: deps.timeoutMs,
    // Held whole, up to the cap.
    holdBytes: deps.bodyBytes,
    maxBytes: deps.bodyBytes,
  });
  const answer = res.body!;
  if (res.status < 200 || res.status > 299) throw new PierError('BAD_GATEWAY', `provider "${ctx.target.name}" answered HTTP ${res.status}`);
  let value: unknown;
  try {
    value = JSON.parse(answer.toString('utf8'));
  } catch {
    throw new PierError('BAD_GATEWAY', `provider "${ctx.target.name}" answered with a body that is not JSON`);
  }
  return answerWith(deps, 200, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify({ code: 0, message: 'success', data: value })));
}

export async function callProvider(deps: ProviderDeps, req: ProviderCall): Promise<ProviderAnswer> {
  const ctx = authorise(deps, req);
  const url = targetUrl(ctx.target, req.op, req.query);
  const started = performance.now();
  let status = 500;
  try {
    const answer = ctx.target.version === 'v1' ? await callV1(deps, req, ctx, url) : await forwardV2(deps, req, ctx, url);
    status = answer.status;
    return answer;
  } catch (err) {
    status = err instanceof PierError ? err.status : 500;
    throw err;
  } finally {
    deps.observe(ctx.target.name, status, (performance.now() - started) / 1000);
  }
}

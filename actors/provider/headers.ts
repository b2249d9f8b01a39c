/** Hop-by-hop headers (RFC 9110 section 7.6.1) and those a proxy recomputes: never forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length']);

/** Credentials of the caller that a provider must never see. */
const CALLER_SECRETS = new Set(['x-access-token', 'x-authorization', 'cookie', 'authorization', 'x-app-key', 'x-app-secret']);

/**
 * Headers only Pier may set: a caller sending them would speak for Pier (who calls, for which
 * user, from where; the trace, which Pier checks and bounds: docs/operations.md "Tracing"), so the
 * caller's are dropped and Pier's own put in their place.
 */
const PIER_SET = (k: string) => k.startsWith('x-pier-') || k === 'x-bfl-user' || k.startsWith('x-forwarded-') || k === 'forwarded' || k === 'x-real-ip' || k === 'traceparent' || k === 'tracestate';

/**
 * The names a `Connection` value lists (trimmed, lower-cased; an empty item is `''`). One name, as on
 * nearly every call (`keep-alive`, `close`), is that name alone: no array or set made per call.
 */
function listedBy(connection: string): string | Set<string> {
  if (!connection.includes(',')) return connection.trim().toLowerCase();
  return new Set(connection.split(',').map((s) => s.trim().toLowerCase()));
}

const isListed = (listed: string | Set<string>, k: string) => (typeof listed === 'string' ? k === listed : listed.has(k));

// Both directions walk the headers with for-in (own keys of a plain object, in the same order as
// Object.entries) rather than making an array of entries per call.

/** Headers of the caller's request as the provider gets them (docs/protocol.md "Provider calls"), plus who is calling. */
export function requestHeaders(client: Record<string, string>, caller: { app: string; user: string; address: string }): Record<string, string> {
  const dropped = listedBy(client.connection ?? '');
  const out: Record<string, string> = {};
  for (const k in client) {
    if (HOP_BY_HOP.has(k) || CALLER_SECRETS.has(k) || isListed(dropped, k) || PIER_SET(k)) continue;
    out[k] = client[k];
  }
  out['x-pier-caller'] = caller.app;
  out['x-bfl-user'] = caller.user;
  out['x-forwarded-for'] = caller.address;
  return out;
}

/** Headers of the provider's answer as the caller gets them. */
export function responseHeaders(upstream: Record<string, string | string[] | undefined>): Record<string, string> {
  const dropped = listedBy(String(upstream.connection ?? ''));
  const out: Record<string, string> = {};
  for (const k in upstream) {
    const v = upstream[k];
    if (v === undefined || HOP_BY_HOP.has(k) || isListed(dropped, k) || k === 'date') continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

import { MAX_JSON_DEPTH, nestsDeeperThan } from '../http/json-depth.js';

/** The host name of a `Host` header value (`name`, `name:port`, `[v6]:port`), lower-case, without the port. */
export function hostNameOf(host: string): string {
  return host.trim().toLowerCase().replace(/:\d*$/, '');
}

/** `<app>.<user>.<domain>[:port]` → its app and user, or null when the Host is not of that form. */
export function parseAppHost(host: string, domain: string): { app: string; user: string } | null {
  const name = hostNameOf(host);
  const suffix = `.${domain.toLowerCase()}`;
  if (!name.endsWith(suffix)) return null;
  const labels = name.slice(0, -suffix.length).split('.');
  if (labels.length !== 2 || !/^[a-z][a-z0-9]{0,30}$/.test(labels[0]) || !/^[a-z][a-z0-9-]{0,30}$/.test(labels[1])) return null;
  return { app: labels[0], user: labels[1] };
}

/**
 * An `Origin`, when sent, must be the app's own: `http` or `https`, the same host name as the
 * request's Host, any port. Cookies are scoped by host name, not port, so a page on the app's dev
 * server (other port) or behind a proxy that drops or rewrites the port is still the app's page.
 */
export function originAllowed(origin: string | undefined, host: string): boolean {
  if (origin === undefined || origin === '') return true;
  try {
    const u = new URL(origin);
    return (u.protocol === 'https:' || u.protocol === 'http:') && u.hostname.toLowerCase() === hostNameOf(host) && hostNameOf(host) !== '';
  } catch {
    return false;
  }
}

/** What a client frame becomes in the `message` callback's `data` (docs/protocol.md "Gateway"). */
export function frameToData(message: ArrayBuffer, isBinary: boolean): { data: unknown; ping: boolean } {
  const bytes = Buffer.from(message);
  if (isBinary) return { data: { event: '', data: { raw: bytes.toString('base64'), encoding: 'base64' } }, ping: false };
  const text = bytes.toString('utf8');
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) return { data: { event: '', data: { raw: text } }, ping: false };
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && typeof (value as { event?: unknown }).event === 'string') {
      const v = value as { event: string; data?: unknown };
      return { data: v, ping: v.event === 'ping' };
    }
  } catch {
    // not JSON: forwarded raw
  }
  return { data: { event: '', data: { raw: text } }, ping: false };
}

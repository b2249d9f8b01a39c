import { isIP } from 'node:net';

// What a request's `Host` and `Origin` headers say, read in one place: the app a browser-facing
// request is for (`<app>.<user>.<domain>`), whether its Origin is that app's, which names the
// admin listener answers, and whether a console change comes from the console's own origin.

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

/**
 * Whether an `Origin` is the request's own `Host`, port included (the console's: its page and the
 * admin API it calls are one listener, so nothing but an exact match is its own).
 */
export function sameOrigin(origin: string, host: string): boolean {
  try {
    return new URL(origin).host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/**
 * Which `Host` the operator's listeners answer (docs/security.md, "The admin listener"): loopback
 * names (`localhost`, `*.localhost`, which browsers resolve themselves), IP addresses (how the CLI
 * and Prometheus reach them) and the names the operator configured (`PIER_ADMIN_HOSTS`). A web page
 * whose name was re-bound by DNS to 127.0.0.1 sends its own name, and is refused: it can neither
 * read `/metrics` and the console page nor post to them.
 */
export function adminHostAllowed(host: string | undefined, configured: readonly string[]): boolean {
  if (host === undefined || host === '' || host.length > 300) return false;
  const name = wellFormedHostName(host.toLowerCase());
  if (name === null) return false;
  if (isIP(name) !== 0) return true;
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  return configured.includes(name);
}

/** The host part of a Host header (`[::1]:40090` → `::1`, `example:80` → `example`), or null when malformed. */
function wellFormedHostName(host: string): string | null {
  const v6 = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(host);
  if (v6) return v6[1];
  const m = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(host);
  return m ? m[1].replace(/\.$/, '') : null;
}

import { isIP } from 'node:net';

/**
 * Which `Host` the operator's listeners answer (docs/security.md, "The admin listener"): loopback
 * names (`localhost`, `*.localhost`, which browsers resolve themselves), IP addresses (how the CLI
 * and Prometheus reach them) and the names the operator configured (`PIER_ADMIN_HOSTS`). A web page
 * whose name was re-bound by DNS to 127.0.0.1 sends its own name, and is refused: it can neither
 * read `/metrics` and the console page nor post to them.
 */
export function adminHostAllowed(host: string | undefined, configured: readonly string[]): boolean {
  if (host === undefined || host === '' || host.length > 300) return false;
  const name = hostName(host.toLowerCase());
  if (name === null) return false;
  if (isIP(name) !== 0) return true;
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  return configured.includes(name);
}

/** The host part of a Host header (`[::1]:40090` → `::1`, `example:80` → `example`), or null when malformed. */
function hostName(host: string): string | null {
  const v6 = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/.exec(host);
  if (v6) return v6[1];
  const m = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(host);
  return m ? m[1].replace(/\.$/, '') : null;
}

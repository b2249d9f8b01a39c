/** `<app>.<user>.<domain>[:port]` → its app and user, or null when the Host is not of that form. */
export function parseAppHost(host: string, domain: string): { app: string; user: string } | null {
  const name = host.toLowerCase().replace(/:\d+$/, '');
  const suffix = `.${domain.toLowerCase()}`;
  if (!name.endsWith(suffix)) return null;
  const labels = name.slice(0, -suffix.length).split('.');
  if (labels.length !== 2 || !/^[a-z][a-z0-9]{0,30}$/.test(labels[0]) || !/^[a-z][a-z0-9-]{0,30}$/.test(labels[1])) return null;
  return { app: labels[0], user: labels[1] };
}

/** An `Origin`, when sent, must be the app's own: same host (and port) as the request's Host. */
export function originAllowed(origin: string | undefined, host: string): boolean {
  if (origin === undefined || origin === '') return true;
  try {
    const u = new URL(origin);
    return (u.protocol === 'https:' || u.protocol === 'http:') && u.host.toLowerCase() === host.toLowerCase();
  } catch {
    return false;
  }
}

/** What a client frame becomes in the `message` callback's `data` (CONTRACT.md section 6). */
export function frameToData(message: ArrayBuffer, isBinary: boolean): { data: unknown; ping: boolean } {
  const bytes = Buffer.from(message);
  if (isBinary) return { data: { event: '', data: { raw: bytes.toString('base64'), encoding: 'base64' } }, ping: false };
  const text = bytes.toString('utf8');
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

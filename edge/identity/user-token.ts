/**
 * The user's auth token from a request's headers: `X-Authorization`, else the `auth_token` cookie
 * (docs/protocol.md "Identities"). Empty when neither is present.
 */
export function userTokenOf(headers: Record<string, string>): string {
  const header = headers['x-authorization'];
  if (header) return header.trim();
  for (const part of (headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === 'auth_token') {
      const raw = part.slice(eq + 1).trim();
      try {
        return decodeURIComponent(raw);
      } catch {
        return raw;
      }
    }
  }
  return '';
}

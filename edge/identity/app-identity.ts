import { PierError } from '../../bus/errors.js';
import type { AppView } from '../../bus/subjects.js';
import type { RegistryCache } from '../../lib/state/registry-cache.js';
import { userTokenOf } from './user-token.js';
import { originAllowed, parseAppHost } from './host.js';

export interface BrowserCaller {
  user: string;
  app: AppView;
}

/**
 * Who a browser-facing request (WebSocket upgrade, upload) comes from (docs/protocol.md "Identities"): the
 * user from the token (cookie `auth_token` or `X-Authorization`), the app from the Host
 * `<app>.<user>.<domain>` (or the sidecar's app), the Host's user must be the token's, and an
 * `Origin`, when sent, must be the app's own. Throws 401/403/404 (503 when the registry is out of reach).
 */
export function identifyBrowserCaller(headers: Record<string, string>, cache: RegistryCache, domain: string, sidecar: { user: string; app: string } | null): BrowserCaller {
  const host = headers.host ?? '';
  const target = sidecar ?? parseAppHost(host, domain);
  if (!target) throw new PierError('NOT_FOUND', `Host must be <app>.<user>.${domain}`);
  const token = userTokenOf(headers);
  const user = token ? cache.userForToken(token) : undefined;
  if (!user) throw new PierError('UNAUTHORIZED', 'a valid user token is required (auth_token cookie or X-Authorization)');
  if (user !== target.user) throw new PierError('FORBIDDEN', "the token's user does not own this app instance");
  if (!originAllowed(headers.origin, host)) throw new PierError('FORBIDDEN', "Origin is not the app's origin");
  const app = cache.app(target.user, target.app);
  if (!app) throw new PierError('NOT_FOUND', `app "${target.app}" is not installed for "${target.user}"`);
  return { user, app };
}

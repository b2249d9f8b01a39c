import { isIPv6 } from 'node:net';
import { PierError } from '../../bus/errors.js';
import { appId } from '../../bus/ids.js';
import type { AppView } from '../../bus/subjects.js';
import type { RegistryCache } from '../state/registry-cache.js';

/** Where an app takes its gateway callbacks (docs/protocol.md "Gateway"). */
export interface CallbackTarget {
  host: string;
  port: number;
  /** A path starting with `/` (the manifest's `options.websocket.url`, checked at install). */
  url: string;
}

/**
 * The one rule for an app's callback target: its registered host, with the port and path of its
 * `options.websocket`; null for an app without that option. The edge admits a WebSocket only when
 * this is not null, and the callback actor dials only what it gives, so the two cannot disagree.
 */
export function callbackTarget(app: AppView): CallbackTarget | null {
  return app.websocket ? { host: app.host, port: app.websocket.port, url: app.websocket.url } : null;
}

/**
 * The target of `user`'s app `app` in this process's own registry view (docs/security.md "The bus":
 * never from a gateway event, whose sender could name any address). NOT_FOUND when the view does
 * not know the app or the app takes no callbacks; UNAVAILABLE (from the cache) when the view is stale.
 */
export function registeredTarget(cache: Pick<RegistryCache, 'app'>, user: string, app: string): CallbackTarget {
  const view = cache.app(user, app);
  const target = view ? callbackTarget(view) : null;
  if (!target) throw new PierError('NOT_FOUND', `app "${appId(user, app)}" is not installed here or takes no callbacks`);
  return target;
}

/** The URL to POST to: an IPv6 literal host goes in brackets, so its colons are not read as a port. */
export function callbackUrl(target: CallbackTarget): string {
  return `${callbackOrigin(target)}${target.url}`;
}

/** The origin part of `callbackUrl` (the path is `target.url`): kept apart, undici parses no URL per event. */
export function callbackOrigin(target: CallbackTarget): string {
  const host = isIPv6(target.host) ? `[${target.host}]` : target.host;
  return `http://${host}:${target.port}`;
}

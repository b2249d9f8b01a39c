import { traceHeaders } from './trace.js';
import { NetworkError } from '../errors.js';
import type { AccessTokens, Perm } from './tokens.js';

/**
 * A request to Pier's system server carrying an access token for `perm`. What a provider or vault
 * client needs of the app, and nothing more: it lives apart from `PierApp` so that the clients
 * `PierApp` makes do not import `PierApp` back.
 */
export interface SystemFetch {
  fetchWithToken(perm: Perm, path: string, init: RequestInit & { signal?: AbortSignal }): Promise<Response>;
}

/**
 * The system server at `host:port`. A 401 means the token died early (the app was reinstalled, its
 * key rotated): it is dropped and the request sent once more with a new one, if its body can be
 * sent twice.
 */
export class SystemServerClient implements SystemFetch {
  constructor(
    private readonly systemServer: string,
    private readonly tokens: AccessTokens,
    private readonly timeoutMs: number,
  ) {}

  async fetchWithToken(perm: Perm, path: string, init: RequestInit & { signal?: AbortSignal }): Promise<Response> {
    const send = async (token: string) => {
      try {
        return await fetch(`http://${this.systemServer}${path}`, {
          ...init,
          headers: { ...traceHeaders(), ...(init.headers as Record<string, string> | undefined), 'x-access-token': token },
          signal: init.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(this.timeoutMs)]) : AbortSignal.timeout(this.timeoutMs),
          ...(init.body && !isReplayable(init.body) ? { duplex: 'half' } : {}),
        } as RequestInit);
      } catch (err) {
        throw new NetworkError(`${path} did not answer`, { cause: err });
      }
    };
    const token = await this.tokens.get(perm);
    const res = await send(token);
    if (res.status !== 401) return res;
    this.tokens.invalidate(perm, token);
    if (init.body && !isReplayable(init.body)) return res;
    await res.body?.cancel();
    return send(await this.tokens.get(perm));
  }
}

function isReplayable(body: unknown): boolean {
  return typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer || body instanceof URLSearchParams;
}

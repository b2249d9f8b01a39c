import { GatewayClient } from './gateway.js';
import { ProviderClient, type ProviderSpec } from './provider.js';
import { SystemServerClient } from './system-fetch.js';
import { AccessTokens, type Perm, type TokenOptions } from './tokens.js';
import { VaultClient, type VaultOptions } from './vault.js';

export interface PierAppOptions {
  /** `host:port` of Pier's system server, no scheme (`OS_SYSTEM_SERVER`). */
  systemServer: string;
  appKey: string;
  appSecret: string;
  /** The gateway's local API (default `http://127.0.0.1:40010`, or `PIER_GATEWAY_URL` with fromEnv). */
  gatewayUrl?: string;
  /** Longest wait for any one answer (default 30 s, Pier's own provider timeout). */
  timeoutMs?: number;
  tokens?: TokenOptions;
}

/**
 * One app's handle on Pier, server side: access tokens, provider calls, the vault and the
 * gateway's local API. Create it once per process (`PierApp.fromEnv()`): its token cache is shared
 * by everything made from it.
 */
export class PierApp {
  readonly tokens: AccessTokens;
  readonly gateway: GatewayClient;
  readonly timeoutMs: number;
  private readonly system: SystemServerClient;

  constructor(readonly options: PierAppOptions) {
    if (!/^[^/\s]+:\d+$/.test(options.systemServer)) throw new TypeError(`systemServer: must be host:port without a scheme (got "${options.systemServer}")`);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.tokens = new AccessTokens(options.systemServer, options.appKey, options.appSecret, options.tokens);
    this.system = new SystemServerClient(options.systemServer, this.tokens, this.timeoutMs);
    this.gateway = new GatewayClient(options.gatewayUrl ?? 'http://127.0.0.1:40010', options.appKey, options.appSecret, this.timeoutMs);
  }

  /** From the variables the platform injects: `OS_SYSTEM_SERVER`, `OS_APP_KEY`, `OS_APP_SECRET` (and optional `PIER_GATEWAY_URL`). */
  static fromEnv(env: Record<string, string | undefined> = process.env, options: Omit<Partial<PierAppOptions>, 'systemServer' | 'appKey' | 'appSecret'> = {}): PierApp {
    const need = (name: string) => {
      const value = env[name];
      if (!value) throw new TypeError(`${name}: is not set (the platform injects it at install; \`pier app install --json\` prints it)`);
      return value;
    };
    return new PierApp({ ...options, systemServer: need('OS_SYSTEM_SERVER'), appKey: need('OS_APP_KEY'), appSecret: need('OS_APP_SECRET'), gatewayUrl: options.gatewayUrl ?? env.PIER_GATEWAY_URL });
  }

  /** Calls to another app's provider (`version: 'v1'` uses the v1 envelope, anything else is passed through). */
  provider(spec: ProviderSpec): ProviderClient {
    return new ProviderClient(this, spec);
  }

  /** The vault's secrets of one workspace. */
  vault(workspace: string, options: VaultOptions = {}): VaultClient {
    return new VaultClient(this, workspace, options);
  }

  /** A request to the system server with an access token for `perm` (see SystemServerClient). */
  fetchWithToken(perm: Perm, path: string, init: RequestInit & { signal?: AbortSignal }): Promise<Response> {
    return this.system.fetchWithToken(perm, path, init);
  }
}

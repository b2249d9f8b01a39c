import { exchange, shared } from './exchange.js';

/** A call to `/system-server/v1alpha1/<dataType>/<group>/<version>/<op>`, as the edge received it. */
export interface ProviderCall {
  dataType: string;
  group: string;
  version: string;
  op: string;
  method: string;
  /** Raw query string, without `?`. */
  query: string;
  /** The client's headers (lower-case names); the actor decides what is forwarded. */
  headers: Record<string, string>;
  accessToken: string;
  /** The caller's address as the edge saw it: the provider gets it as `X-Forwarded-For`. */
  client: string;
  /** The body when small (bus/byte-stream.ts INLINE_BYTES), else null and `bodyStream` names where it is offered. */
  body: Uint8Array | null;
  bodyStream: string | null;
}

export interface ProviderAnswer {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array | null;
  /** Where the rest of a large answer is offered (bus/byte-stream.ts); the actor reads the provider as the edge takes it. */
  bodyStream: string | null;
}

/**
 * A call's checks passed before its body is read (docs/protocol.md "Provider calls"): the edge reads the body
 * only then. `until` (ms): the access token's expiry, past which the same checks may not pass.
 */
export interface CallGate {
  until: number;
}

export type ProviderAuthorize = Pick<ProviderCall, 'dataType' | 'group' | 'version' | 'op' | 'accessToken'>;

const segment = { type: 'string', min: 1, max: 256 } as const;

export const provider = {
  /**
   * Authorises the access token and op, finds the active provider, calls it (v2 forward or v1
   * envelope). Shared within one process: the request (its headers and body the edge's own copies)
   * is only read, the answer is built afresh.
   */
  call: shared(exchange<ProviderCall, ProviderAnswer>({ subject: 'pier.provider.call', queue: 'provider', request: {
    dataType: segment,
    group: segment,
    version: segment,
    op: segment,
    method: { type: 'string', min: 1, max: 16 },
    query: { type: 'string', max: 16 * 1024 },
    headers: { type: 'record', key: { type: 'string' }, value: { type: 'string' } },
    accessToken: { type: 'string', max: 64 * 1024 },
    client: { type: 'string', max: 64 },
    body: { type: 'any', nullable: true },
    bodyStream: { type: 'string', nullable: true, pattern: /^pier\.stream\.edge\.[0-9a-f]{24}$/ },
  }, seal: { request: 'provider' } })),
  /** The checks of `call` (401, 403, 404) alone, asked by the edge before it reads the body. */
  authorize: shared(exchange<ProviderAuthorize, CallGate>({ subject: 'pier.provider.authorize', queue: 'provider', request: {
    dataType: segment,
    group: segment,
    version: segment,
    op: segment,
    accessToken: { type: 'string', max: 64 * 1024 },
  }, seal: { request: 'provider', grant: 'provider' } })),
};


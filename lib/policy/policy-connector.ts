import { buildConnector } from 'undici';
import type { AddressPolicy } from './address-policy.js';

/**
 * undici's `connect` option for a pool whose every connection must go to an address the policy
 * allows. The name is resolved here, at dial time, and the address the policy chose is the one
 * dialled (so a name cannot pass the check and then resolve elsewhere); the request itself still
 * names the host, so its Host header is unchanged. A refusal fails the dial with the policy's
 * error (`isPolicyRefusal`), which undici hands back to the request as it is.
 */
export function policyConnector(policy: AddressPolicy, timeoutMs = 5_000): buildConnector.connector {
  const dial = buildConnector({ timeout: timeoutMs });
  return (opts, callback) => {
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    policy.resolve(opts.hostname, port).then(
      (address) => dial({ ...opts, hostname: address }, callback),
      (err: Error) => callback(err, null),
    );
  };
}
